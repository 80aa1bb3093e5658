// Command proxybench compares the gateway with a bare reverse proxy. In one
// process it starts a fake upstream on loopback and, in front of it, a
// net/http/httputil.ReverseProxy and the gateway (the gw.Server handler
// on its own listener), and drives all three paths (and the upstream
// directly) with the same closed-loop clients, in interleaved rounds:
//
//	go run ./examples/gateway/cmd/proxybench
//	go run ./examples/gateway/cmd/proxybench -c 32 -rounds 7 -d 2s -mode stream
//
// For each mode (json: a whole answer; stream: server-sent events) it
// prints the median over the rounds of the requests per second and of
// the p50 and p99 latencies of every path, the gateway's throughput as a
// share of the bare proxy's, and the latency it adds over the proxy and
// over the direct call. The rounds rotate the order of the paths, so that
// a slow stretch of a shared machine does not fall on one path only.
package main

import (
	"bytes"
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/http/httputil"
	"net/url"
	"os"
	"runtime/pprof"
	"slices"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"text/tabwriter"
	"time"

	"github.com/routeguard/routeguard/examples/gateway/gw"
)

// options are the command's flags.
type options struct {
	conns    int
	rounds   int
	duration time.Duration
	modes    []string
	events   int // events of a streamed answer
	profile  string
	paths    []string // of allPaths; all when empty
	plainTr  bool     // the gateway on a plain pooled transport instead of its own
}

func main() {
	var o options
	mode := flag.String("mode", "json,stream", "modes to run, comma-separated: json, stream")
	flag.IntVar(&o.conns, "c", 32, "concurrent client connections")
	flag.IntVar(&o.rounds, "rounds", 5, "interleaved rounds per mode")
	flag.DurationVar(&o.duration, "d", 2*time.Second, "length of one path's run in a round")
	flag.IntVar(&o.events, "events", 16, "content events of a streamed answer")
	flag.StringVar(&o.profile, "cpuprofile", "", "write a CPU profile of the whole run to this file")
	only := flag.String("paths", strings.Join(allPaths, ","), "paths to run, comma-separated (a profile of one path shows its own costs)")
	flag.BoolVar(&o.plainTr, "plain-transport", false,
		"give the gateway a plain pooled http.Transport (256 idle connections per host) instead of its tuned one")
	flag.Parse()
	o.modes = strings.Split(*mode, ",")
	o.paths = strings.Split(*only, ",")
	if err := run(os.Stdout, o); err != nil {
		fmt.Fprintln(os.Stderr, "proxybench:", err)
		os.Exit(1)
	}
}

// The paths, in the order of the table.
const (
	pathDirect  = "direct"
	pathProxy   = "proxy"
	pathGateway = "gateway"
)

var allPaths = []string{pathDirect, pathProxy, pathGateway}

// result is one path's run.
type result struct {
	rps      float64
	p50, p99 time.Duration
	cpu      time.Duration // CPU time of the whole process per request
}

func run(out io.Writer, o options) error {
	if o.profile != "" {
		f, err := os.Create(o.profile)
		if err != nil {
			return err
		}
		defer f.Close()
		if err := pprof.StartCPUProfile(f); err != nil {
			return err
		}
		defer pprof.StopCPUProfile()
	}
	rig, err := newRig(o)
	if err != nil {
		return err
	}
	defer rig.close()
	paths := o.paths
	if len(paths) == 0 {
		paths = allPaths
	}
	for _, p := range paths {
		if rig.urls[p] == "" {
			return fmt.Errorf("unknown path %q", p)
		}
	}
	fmt.Fprintf(out, "%d connections, %d rounds of %v per path, median of rounds\n", o.conns, o.rounds, o.duration)
	for _, mode := range o.modes {
		body, ok := rig.bodies[mode]
		if !ok {
			return fmt.Errorf("unknown mode %q", mode)
		}
		// Warm every path: open the keep-alive connections.
		for _, p := range paths {
			if _, err := rig.load(rig.urls[p], body, min(o.duration, 200*time.Millisecond)); err != nil {
				return fmt.Errorf("%s %s: %w", mode, p, err)
			}
		}
		all := map[string][]result{}
		for r := range o.rounds {
			for k := range paths {
				p := paths[(k+r)%len(paths)]
				res, err := rig.load(rig.urls[p], body, o.duration)
				if err != nil {
					return fmt.Errorf("%s %s: %w", mode, p, err)
				}
				all[p] = append(all[p], res)
			}
		}
		report(out, mode, paths, all)
	}
	return nil
}

// report prints one mode's table.
func report(out io.Writer, mode string, paths []string, all map[string][]result) {
	med := map[string]result{}
	for p, rs := range all {
		med[p] = result{
			rps: median(rs, func(r result) float64 { return r.rps }),
			p50: time.Duration(median(rs, func(r result) float64 { return float64(r.p50) })),
			p99: time.Duration(median(rs, func(r result) float64 { return float64(r.p99) })),
			cpu: time.Duration(median(rs, func(r result) float64 { return float64(r.cpu) })),
		}
	}
	fmt.Fprintf(out, "\n%s\n", mode)
	tw := tabwriter.NewWriter(out, 0, 0, 2, ' ', tabwriter.AlignRight)
	fmt.Fprintln(tw, "path\trps\tp50\tp99\trps/proxy\tCPU/request\t")
	for _, p := range paths {
		m := med[p]
		ratio := "-"
		if px, ok := med[pathProxy]; ok {
			ratio = strconv.FormatFloat(m.rps/px.rps, 'f', 2, 64) + "×"
		}
		fmt.Fprintf(tw, "%s\t%.0f\t%s\t%s\t%s\t%.0fµs\t\n", p, m.rps, ms(m.p50), ms(m.p99), ratio, float64(m.cpu)/1e3)
	}
	tw.Flush()
	g, px, d := med[pathGateway], med[pathProxy], med[pathDirect]
	if len(all) < len(allPaths) {
		return
	}
	fmt.Fprintf(out, "gateway: %.2f× the proxy's rps; p50 %s over the proxy, %s over direct; p99 %s over the proxy\n",
		g.rps/px.rps, ms(g.p50-px.p50), ms(g.p50-d.p50), ms(g.p99-px.p99))
	// On a machine shared with other work the wall-clock ratios swing;
	// the CPU time per request does not: the gateway's throughput bound
	// relative to the proxy's when the machine is its own.
	fmt.Fprintf(out, "gateway: %.2f× the proxy's CPU per request (its own part: %.0fµs, the proxy's %.0fµs)\n",
		float64(g.cpu)/float64(px.cpu), float64(g.cpu-d.cpu)/1e3, float64(px.cpu-d.cpu)/1e3)
}

func ms(d time.Duration) string { return strconv.FormatFloat(float64(d)/1e6, 'f', 2, 64) + "ms" }

func median(rs []result, f func(result) float64) float64 {
	v := make([]float64, len(rs))
	for i, r := range rs {
		v[i] = f(r)
	}
	slices.Sort(v)
	if len(v) == 0 {
		return 0
	}
	if len(v)%2 == 1 {
		return v[len(v)/2]
	}
	return (v[len(v)/2-1] + v[len(v)/2]) / 2
}

// rig is the upstream, the proxy and the gateway, each on its own
// loopback listener, and the client that drives them.
type rig struct {
	o       options
	servers []*http.Server
	gw      *gw.Server
	tr      *http.Transport // the clients'
	pxTr    *http.Transport // the proxy's
	gwTr    *http.Transport // the gateway's, with -plain-transport
	client  *http.Client
	urls    map[string]string
	bodies  map[string][]byte
}

func newRig(o options) (*rig, error) {
	r := &rig{o: o, urls: map[string]string{}, bodies: map[string][]byte{}}
	upURL, err := r.serve(upstream(o.events))
	if err != nil {
		return nil, err
	}
	r.urls[pathDirect] = upURL + "/v1/chat/completions"

	target, _ := url.Parse(upURL)
	rp := httputil.NewSingleHostReverseProxy(target)
	r.pxTr = &http.Transport{MaxIdleConns: 1024, MaxIdleConnsPerHost: 256}
	rp.Transport = r.pxTr
	pxURL, err := r.serve(rp)
	if err != nil {
		r.close()
		return nil, err
	}
	r.urls[pathProxy] = pxURL + "/v1/chat/completions"

	cfg := &gw.Config{
		Providers: []gw.Provider{{ID: "bench", BaseURL: upURL + "/v1",
			Connections: []gw.Connection{{ID: "b1", APIKey: "sk-upstream"}}}},
		Combos: []gw.Combo{{Name: "bench", Strategy: "priority", Targets: []gw.Target{{Provider: "bench", Model: "m"}}}},
	}
	var gwo gw.Options
	if o.plainTr {
		r.gwTr = &http.Transport{MaxIdleConns: 1024, MaxIdleConnsPerHost: 256, IdleConnTimeout: 90 * time.Second}
		gwo.Upstream = r.gwTr
	}
	if r.gw, err = gw.New(cfg, gwo); err != nil {
		r.close()
		return nil, err
	}
	gwURL, err := r.serve(r.gw)
	if err != nil {
		r.close()
		return nil, err
	}
	r.urls[pathGateway] = gwURL + "/v1/chat/completions"

	r.tr = &http.Transport{MaxIdleConns: 4 * o.conns, MaxIdleConnsPerHost: 2 * o.conns, DisableCompression: true}
	r.client = &http.Client{Transport: r.tr, Timeout: 30 * time.Second}
	for _, mode := range []string{"json", "stream"} {
		r.bodies[mode] = chatBody(mode == "stream")
	}
	return r, nil
}

// serve serves h on a new loopback listener and returns its base URL.
func (r *rig) serve(h http.Handler) (string, error) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return "", err
	}
	srv := &http.Server{Handler: h, ReadHeaderTimeout: 10 * time.Second}
	r.servers = append(r.servers, srv)
	go func() { _ = srv.Serve(ln) }()
	return "http://" + ln.Addr().String(), nil
}

func (r *rig) close() {
	for _, s := range r.servers {
		_ = s.Shutdown(context.Background())
	}
	if r.gw != nil {
		r.gw.Close()
	}
	for _, tr := range []*http.Transport{r.tr, r.pxTr, r.gwTr} {
		if tr != nil {
			tr.CloseIdleConnections()
		}
	}
}

// load runs o.conns closed-loop clients against u for d.
func (r *rig) load(u string, body []byte, d time.Duration) (result, error) {
	var (
		mu       sync.Mutex
		lat      []time.Duration
		firstErr error
		wg       sync.WaitGroup
	)
	stop := time.Now().Add(d)
	start, cpu0 := time.Now(), cpuTime()
	for range r.o.conns {
		wg.Add(1)
		go func() {
			defer wg.Done()
			mine := make([]time.Duration, 0, 1024)
			var err error
			for time.Now().Before(stop) {
				var l time.Duration
				if l, err = r.call(u, body); err != nil {
					break
				}
				mine = append(mine, l)
			}
			mu.Lock()
			lat = append(lat, mine...)
			if err != nil && firstErr == nil {
				firstErr = err
			}
			mu.Unlock()
		}()
	}
	wg.Wait()
	elapsed, cpu := time.Since(start), cpuTime()-cpu0
	if firstErr != nil {
		return result{}, firstErr
	}
	if len(lat) == 0 {
		return result{}, errors.New("no request finished")
	}
	slices.Sort(lat)
	return result{rps: float64(len(lat)) / elapsed.Seconds(), p50: rank(lat, 50), p99: rank(lat, 99),
		cpu: cpu / time.Duration(len(lat))}, nil
}

// cpuTime is the user and system CPU time the process has used.
func cpuTime() time.Duration {
	var ru syscall.Rusage
	if syscall.Getrusage(syscall.RUSAGE_SELF, &ru) != nil {
		return 0
	}
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}

// rank is the p-th percentile of sorted, by the nearest-rank method.
func rank(sorted []time.Duration, p float64) time.Duration {
	k := int(float64(len(sorted))*p/100+0.999999) - 1
	return sorted[min(max(k, 0), len(sorted)-1)]
}

// call sends one chat request and reads the whole answer.
func (r *rig) call(u string, body []byte) (time.Duration, error) {
	req, err := http.NewRequest(http.MethodPost, u, bytes.NewReader(body))
	if err != nil {
		return 0, err
	}
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("Authorization", "Bearer sk-client")
	start := time.Now()
	resp, err := r.client.Do(req)
	if err != nil {
		return 0, err
	}
	_, err = io.Copy(io.Discard, resp.Body)
	resp.Body.Close()
	if err == nil && resp.StatusCode != http.StatusOK {
		err = fmt.Errorf("status %d", resp.StatusCode)
	}
	return time.Since(start), err
}

// chatBody is a 2 KB chat request: a system prompt and a user message.
func chatBody(stream bool) []byte {
	return []byte(`{"model":"bench","stream":` + strconv.FormatBool(stream) + `,"temperature":0.7,"messages":[` +
		`{"role":"system","content":"` + strings.Repeat("You are a helpful assistant who answers briefly. ", 16) + `"},` +
		`{"role":"user","content":"` + strings.Repeat(`Please summarise the notes on request routing and retries.\n`, 18) + `"}]}`)
}

// upstream is the fake provider: it reads the request and answers with a
// chat completion, or with events content events and [DONE] when the
// request asks for a stream.
func upstream(events int) http.Handler {
	completion := []byte(`{"id":"chatcmpl-1","object":"chat.completion","created":1,"model":"m","choices":[{"index":0,` +
		`"message":{"role":"assistant","content":"` + strings.Repeat("Routing keeps requests flowing. ", 8) +
		`"},"finish_reason":"stop"}],"usage":{"prompt_tokens":420,"completion_tokens":64,"total_tokens":484}}`)
	event := []byte(`data: {"id":"chatcmpl-1","object":"chat.completion.chunk","created":1,"model":"m",` +
		`"choices":[{"index":0,"delta":{"content":"Routing keeps requests flowing. "},"finish_reason":null}]}` + "\n\n")
	streamFlag := []byte(`"stream":true`)
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		body, err := io.ReadAll(r.Body)
		if err != nil {
			http.Error(w, err.Error(), http.StatusBadRequest)
			return
		}
		if !bytes.Contains(body, streamFlag) {
			w.Header().Set("Content-Type", "application/json")
			w.Header().Set("Content-Length", strconv.Itoa(len(completion)))
			_, _ = w.Write(completion)
			return
		}
		w.Header().Set("Content-Type", "text/event-stream")
		w.Header().Set("Cache-Control", "no-cache")
		rc := http.NewResponseController(w)
		for range events {
			_, _ = w.Write(event)
			_ = rc.Flush()
		}
		_, _ = w.Write([]byte("data: [DONE]\n\n"))
	})
}
