package main

// The JSON Schema of the configuration, from the Go types of package gw.
//go:generate go run ./internal/schemagen
