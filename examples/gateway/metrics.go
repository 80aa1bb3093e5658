package main

import (
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http"
	"time"

	"github.com/routeguard/routeguard/examples/gateway/gw"
)

// serveMetrics serves GET /metrics on cfg.Metrics.Listen, without
// authentication, when the configuration gives the metrics a listener of
// their own; the returned function closes it. Otherwise the main listener
// serves /metrics behind the admin token and serveMetrics does nothing.
func serveMetrics(srv *gw.Server, cfg *gw.Config, stdout io.Writer, logger *slog.Logger) (func(), error) {
	h := srv.MetricsHandler()
	if h == nil || cfg.Metrics.Listen == "" {
		return func() {}, nil
	}
	ln, err := net.Listen("tcp", cfg.Metrics.Listen)
	if err != nil {
		return nil, fmt.Errorf("metrics listener: %w", err)
	}
	mux := http.NewServeMux()
	mux.Handle("GET "+gw.MetricsPath, h)
	hs := &http.Server{Handler: mux, ReadHeaderTimeout: 10 * time.Second,
		ErrorLog: slog.NewLogLogger(logger.Handler(), slog.LevelWarn)}
	done := make(chan struct{})
	go func() {
		defer close(done)
		_ = hs.Serve(ln)
	}()
	fmt.Fprintf(stdout, "metrics on http://%s%s\n", ln.Addr(), gw.MetricsPath)
	return func() {
		hs.Close()
		<-done
	}, nil
}
