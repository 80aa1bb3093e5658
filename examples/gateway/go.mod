module github.com/routeguard/routeguard/examples/gateway

go 1.26.0

require (
	github.com/routeguard/routeguard v0.0.0
	github.com/routeguard/routeguard/combo/sqlitestate v0.0.0
)

replace (
	github.com/routeguard/routeguard => ../..
	github.com/routeguard/routeguard/combo/sqlitestate => ../../combo/sqlitestate
)
