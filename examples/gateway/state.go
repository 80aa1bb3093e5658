package main

import (
	"context"
	"log/slog"
	"time"

	"github.com/routeguard/routeguard/examples/gateway/gw"
)

// openState opens the state store of this process: the -state flag, else
// the configuration's state.path, else gw.DefaultStateFile next to the
// configuration file. The demo (no configPath) keeps its state in memory
// unless -state names a file. reset (-state-reset) or state.reset deletes
// the file first.
func openState(flagPath string, reset bool, cfg *gw.Config, configPath string, logger *slog.Logger) (*gw.State, error) {
	path := gw.StateMemory
	if configPath != "" || flagPath != "" {
		path = gw.ResolveStatePath(flagPath, cfg.State, configPath)
	}
	st, err := gw.OpenState(path, gw.StateOptions{
		Reset:         reset || cfg.State.Reset,
		FlushInterval: time.Duration(cfg.State.FlushIntervalMs) * time.Millisecond,
		OnError:       func(err error) { logger.Warn("state file write failed; it is retried", "err", err) },
	})
	if err != nil {
		return nil, err
	}
	logger.Info("state", "path", st.Path(), "reset", reset || cfg.State.Reset)
	return st, nil
}

// runWriter runs st's writer on a goroutine of its own until the returned
// function is called; that function stops it and waits until it has
// written what was pending.
func runWriter(st *gw.State, logger *slog.Logger) func() {
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() {
		defer close(done)
		if err := st.Run(ctx); err != nil {
			logger.Error("state writer stopped", "err", err)
		}
	}()
	return func() {
		cancel()
		<-done
	}
}
