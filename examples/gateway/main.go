// Command gateway is a small OpenAI-compatible reverse proxy built on
// routeguard.
//
// With no flags it starts two fake providers on loopback (one of them
// flaky), serves the embedded demo configuration on 127.0.0.1:8080 and
// prints a curl command to try:
//
//	go run ./examples/gateway
//	go run ./examples/gateway -config gateway.json -listen 127.0.0.1:9090
//
// It serves POST /v1/chat/completions (model = a combo name or
// provider/model), GET /v1/models and the admin API under /api/, guarded
// by the configured admin token (the anonymous health answer carries only
// the overall status; session leases are taken with client API keys). SIGINT or SIGTERM stops it: in-flight
// requests get up to the -grace period to finish; a second signal ends the
// process at once.
//
// The package's tests build this binary and drive it over HTTP against
// fake upstreams. The latency the gateway adds on loopback, against calling
// the fake upstream directly, is measured by
//
//	go test -run='^$' -bench=Gateway -benchtime=200ms ./examples/gateway/
package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http"
	"os"
	"os/signal"
	"syscall"
	"time"

	"github.com/routeguard/routeguard/examples/gateway/gw"
)

func main() {
	if err := run(os.Args[1:], os.Stdout, os.Stderr); err != nil {
		fmt.Fprintln(os.Stderr, "gateway:", err)
		os.Exit(1)
	}
}

func run(args []string, stdout, stderr io.Writer) error {
	fs := flag.NewFlagSet("gateway", flag.ContinueOnError)
	fs.SetOutput(stderr)
	configPath := fs.String("config", "", "JSON configuration file (default: the embedded demo with fake providers)")
	listen := fs.String("listen", "", "address to listen on (overrides the config; default "+gw.DefaultListen+")")
	grace := fs.Duration("grace", 10*time.Second, "how long in-flight requests may run after SIGINT/SIGTERM")
	verbose := fs.Bool("v", false, "log every failed or skipped attempt")
	if err := fs.Parse(args); err != nil {
		return err
	}

	cfg, stopDemo, err := loadConfig(*configPath)
	if err != nil {
		return err
	}
	defer stopDemo()
	addr := firstNonEmpty(*listen, cfg.Listen, gw.DefaultListen)

	level := slog.LevelInfo
	if *verbose {
		level = slog.LevelDebug
	}
	logger := slog.New(slog.NewTextHandler(stderr, &slog.HandlerOptions{Level: level}))
	srv, err := gw.New(cfg, gw.Options{Logger: logger})
	if err != nil {
		return err
	}
	defer srv.Close()

	ln, err := net.Listen("tcp", addr)
	if err != nil {
		return err
	}
	hs := &http.Server{Handler: srv, ReadHeaderTimeout: 10 * time.Second, ErrorLog: slog.NewLogLogger(logger.Handler(), slog.LevelWarn)}
	printBanner(stdout, ln.Addr().String(), cfg, *configPath == "")

	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	served := make(chan error, 1)
	go func() { served <- hs.Serve(ln) }()
	select {
	case err := <-served:
		return err
	case <-ctx.Done():
	}
	stop() // a second signal ends the process at once
	fmt.Fprintln(stdout, "shutting down")
	sctx, cancel := context.WithTimeout(context.Background(), *grace)
	defer cancel()
	err = hs.Shutdown(sctx)
	if errors.Is(err, context.DeadlineExceeded) {
		hs.Close()
		err = fmt.Errorf("requests still running after the %v grace period were cut", *grace)
	}
	if serr := <-served; serr != nil && !errors.Is(serr, http.ErrServerClosed) {
		return serr
	}
	return err
}

// loadConfig reads the file at path, or starts the demo providers when
// path is empty. The returned function stops the demo providers.
func loadConfig(path string) (*gw.Config, func(), error) {
	if path == "" {
		return gw.StartDemo()
	}
	cfg, err := gw.Load(path)
	return cfg, func() {}, err
}

func printBanner(w io.Writer, addr string, cfg *gw.Config, demo bool) {
	fmt.Fprintf(w, "routeguard gateway listening on http://%s\n", addr)
	if !demo {
		return
	}
	key := ""
	if len(cfg.APIKeys) > 0 {
		key = " -H 'Authorization: Bearer " + cfg.APIKeys[0].Key + "'"
	}
	fmt.Fprintf(w, "try:\n  curl -s http://%s/v1/chat/completions%s -H 'Content-Type: application/json' -d '{\"model\":\"demo\",\"messages\":[{\"role\":\"user\",\"content\":\"hi\"}]}'\n", addr, key)
	fmt.Fprintf(w, "health:\n  curl -s http://%s/api/monitoring/health -H 'Authorization: Bearer %s'\n", addr, cfg.AdminToken)
}

func firstNonEmpty(s ...string) string {
	for _, x := range s {
		if x != "" {
			return x
		}
	}
	return ""
}
