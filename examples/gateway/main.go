// Command gateway is a small OpenAI-compatible reverse proxy built on
// routeguard.
//
// With no flags it starts two fake providers on loopback (one of them
// flaky), serves the embedded demo configuration on 127.0.0.1:8080 and
// prints a curl command to try:
//
//	go run ./examples/gateway
//	go run ./examples/gateway -config gateway.json -listen 127.0.0.1:9090
//	go run ./examples/gateway -config gateway.yaml -check
//
// The configuration is JSON or YAML (by the file's extension) with one
// schema, config.schema.json; ${NAME} references in its strings are read
// from the environment. -check validates a file and exits: 0 with "ok",
// or 2 with each problem and its field path. SIGHUP, or POST
// /api/gateway/reload with the admin token, reloads the file without a
// restart (a bad file is refused and the running configuration stays).
// The state (leases, cooldowns, pins, breakers, model locks) is kept in
// the SQLite file -state (default routeguard-state.db next to the
// configuration, or the configuration's state.path), so that a restart
// resumes it; -state memory, and the demo, keep it in memory only;
// -state-reset starts from an empty file. With -redis URL (or the
// configuration's redis.url) every replica shares leases and connection
// caps on that Redis, and their breakers' open periods, cooldowns and
// terminal states, model lockouts and session pins (see gw.RedisConfig);
// the state file then keeps a local durable copy of the latter.
//
// It serves POST /v1/chat/completions (model = a combo name or
// provider/model), GET /v1/models and the admin API under /api/, guarded
// by the configured admin token (the anonymous health answer carries only
// the overall status; session leases are taken with client API keys). The
// configuration's "server" section bounds what a client can hold: header,
// request and idle timeouts and a cap on concurrent requests (see package
// gw). SIGINT or SIGTERM stops it: in-flight
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
	"strconv"
	"syscall"
	"time"

	"github.com/routeguard/routeguard/examples/gateway/gw"
)

func main() {
	if err := run(os.Args[1:], os.Stdout, os.Stderr); err != nil {
		var code exitCode
		if errors.As(err, &code) {
			os.Exit(int(code))
		}
		fmt.Fprintln(os.Stderr, "gateway:", err)
		os.Exit(1)
	}
}

func run(args []string, stdout, stderr io.Writer) error {
	fs := flag.NewFlagSet("gateway", flag.ContinueOnError)
	fs.SetOutput(stderr)
	configPath := fs.String("config", "", "configuration file, .json or .yaml/.yml (default: the embedded demo with fake providers)")
	check := fs.Bool("check", false, "validate the -config file and exit: 0 and \"ok\", or 2 with each error")
	listen := fs.String("listen", "", "address to listen on (overrides the config; default "+gw.DefaultListen+")")
	grace := fs.Duration("grace", 10*time.Second, "how long in-flight requests may run after SIGINT/SIGTERM")
	verbose := fs.Bool("v", false, "log every failed or skipped attempt")
	statePath := fs.String("state", "", "SQLite state file, or \"memory\" (default: the config's state.path, else "+gw.DefaultStateFile+" next to the config file; the demo keeps its state in memory)")
	redisURL := fs.String("redis", "", "Redis URL (redis://[user:password@]host:port[/db]) that replicas share leases, connection caps, breakers, cooldowns, lockouts and pins on (default: the config's redis.url; none: each replica on its own)")
	stateReset := fs.Bool("state-reset", false, "delete the state file at start: every lease, cooldown, pin, breaker and lock is forgotten")
	if err := fs.Parse(args); err != nil {
		return err
	}
	if *check {
		return checkConfig(*configPath, stdout)
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
	st, err := openState(*statePath, *stateReset, cfg, *configPath, logger)
	if err != nil {
		return err
	}
	defer st.Close() // last: after the HTTP server has drained
	if err := st.AttachRedis(*redisURL, cfg.Redis, func(down bool) {
		if down {
			logger.Warn("redis unreachable: leases answer 503, slots use local caps")
		} else {
			logger.Info("redis reachable again")
		}
	}); err != nil {
		return err
	}
	if a := st.Redis(); a != "" {
		logger.Info("shared state", "redis", a)
	}
	opts := gw.Options{Logger: logger, State: st}
	if *configPath != "" {
		opts.Load = func() (*gw.Config, error) { return gw.Load(*configPath) }
	}
	srv, err := gw.New(cfg, opts)
	if err != nil {
		return err
	}
	defer srv.Close()

	ln, err := net.Listen("tcp", addr)
	if err != nil {
		return err
	}
	hs := srv.HTTPServer(slog.NewLogLogger(logger.Handler(), slog.LevelWarn))
	printBanner(stdout, ln.Addr().String(), cfg, *configPath == "")
	stopMetrics, err := serveMetrics(srv, cfg, stdout, logger)
	if err != nil {
		return err
	}
	defer stopMetrics()

	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	hup := make(chan os.Signal, 1)
	signal.Notify(hup, syscall.SIGHUP)
	defer signal.Stop(hup)
	go func() { // SIGHUP reloads the file; the outcome is logged
		for {
			select {
			case <-ctx.Done():
				return
			case <-hup:
				_, _ = srv.ReloadSource()
			}
		}
	}()
	stopWriter := runWriter(st, logger)
	defer stopWriter() // writes what is pending, before Close
	slotsCtx, stopSlots := context.WithCancel(ctx)
	slotsDone := make(chan struct{})
	go func() { // renews the shared slots of requests in flight
		defer close(slotsDone)
		_ = srv.RunSlots(slotsCtx)
	}()
	defer func() { stopSlots(); <-slotsDone }()
	// The replicator runs until the HTTP server has drained (requests
	// finishing meanwhile still share what they learn), and stops before
	// the writer's last write, so that the state file keeps what it
	// applied.
	replCtx, stopRepl := context.WithCancel(context.Background())
	replDone := make(chan struct{})
	go func() { // shares breakers, cooldowns, lockouts and pins on Redis
		defer close(replDone)
		_ = srv.RunReplication(replCtx)
	}()
	defer func() { stopRepl(); <-replDone }()
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

// exitCode is an error that ends the process with its code.
type exitCode int

func (e exitCode) Error() string { return "exit status " + strconv.Itoa(int(e)) }

// checkConfig validates the file at path: "ok" on stdout, or each
// problem with its field path and exit status 2.
func checkConfig(path string, stdout io.Writer) error {
	if path == "" {
		fmt.Fprintln(stdout, "-check needs -config")
		return exitCode(2)
	}
	_, err := gw.Load(path)
	if err == nil {
		fmt.Fprintln(stdout, "ok")
		return nil
	}
	fmt.Fprintln(stdout, err)
	return exitCode(2)
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
