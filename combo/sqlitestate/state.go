package sqlitestate

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"strconv"
	"strings"
	"sync"
	"time"

	_ "modernc.org/sqlite" // the pure-Go SQLite driver, registered as "sqlite"
)

// Errors of Open and of a closed State. Every error Open returns for a file it
// cannot use names the file and wraps one of these.
var (
	// ErrUnreadable: the file is not a routeguard state database, is
	// damaged, or cannot be read or written. Open never resets such a file
	// by itself; Options.Reset does, when an operator means it.
	ErrUnreadable = errors.New("sqlitestate: state file unreadable")
	// ErrNewerSchema: the file was written by a newer version of this
	// package, whose schema this one does not know.
	ErrNewerSchema = errors.New("sqlitestate: state file has a newer schema")
	// ErrClosed: the State has been closed.
	ErrClosed = errors.New("sqlitestate: closed")
	// ErrRunning: Run was called while another Run is in progress.
	ErrRunning = errors.New("sqlitestate: already running")
)

// driverName is the database/sql driver Open uses (tests swap it).
var driverName = "sqlite"

// Defaults and ranges of Options.
const (
	defaultBusyTimeout   = 5 * time.Second
	defaultFlushInterval = 250 * time.Millisecond
	defaultMaxBatch      = 1000
	defaultMaxPending    = 100_000
	defaultRetention     = 24 * time.Hour
	defaultSweepInterval = time.Minute
	readConns            = 4
)

// Options configures Open. The zero value gives the defaults documented
// beside each field.
type Options struct {
	// Reset deletes the file (with its -wal and -shm companions) before
	// opening it, so the state starts empty: every lease, generation
	// floor, cooldown, pin, breaker and lockout is forgotten. It is the
	// only way this package ever discards a file; a file it cannot read
	// makes Open fail instead. Default false.
	Reset bool

	// BusyTimeout is how long an operation waits for a lock that another
	// process holds on the file before it fails. Default 5 s; zero or
	// negative means the default; range 1 ms..1 min.
	BusyTimeout time.Duration

	// FlushInterval is how often Run writes the efficiency state that
	// changed (cooldowns, pins, breakers, lockouts), and so the most such
	// state a crash can lose. Default 250 ms; zero or negative means the
	// default; range 1 ms..1 min.
	FlushInterval time.Duration

	// MaxBatch is the most rows one write transaction of the outbox
	// holds; a flush with more pending rows uses several. Default 1000;
	// zero or negative means the default; range 1..100 000.
	MaxBatch int

	// MaxPending bounds the outbox: the number of distinct keys (one per
	// connection, pin, breaker or lockout) waiting to be written. Changes
	// of one key coalesce into one row, so it only fills when the writer
	// is not running or cannot write; a change of a new key beyond it is
	// not persisted and is counted in Stats.Dropped. Default 100 000; zero
	// or negative means the default; range 16..10 000 000.
	MaxPending int

	// Retention is how long an ended lease, and the generation counter of
	// an owner without an active lease, are kept. An owner forgotten after
	// it still never sees a generation again: new owners start above the
	// highest generation of every forgotten owner (the generation floor,
	// kept in the file). Default 24 h; zero or negative means the default;
	// range 1 min..365 days.
	Retention time.Duration

	// SweepInterval is how often Run deletes ended leases past Retention
	// and expired efficiency rows. Default 1 min; zero or negative means
	// the default; range 1 s..24 h.
	SweepInterval time.Duration

	// RelaxedSync sets synchronous=NORMAL instead of FULL: a commit no
	// longer waits for the disk, so lease operations are faster, and a
	// crash of the process still loses nothing, but a power loss or an OS
	// crash may lose the last lease operations. Default false (FULL).
	RelaxedSync bool

	// Clock is the time Open uses to drop expired efficiency state while
	// restoring it, and Run uses for the sweep of efficiency rows and to
	// read the counts of the layers handed to Restore. It must be the
	// clock the gateway drives its layers with. Leases are
	// swept on the store's own clock (the latest now it was given). Nil
	// means time.Now.
	Clock func() time.Time

	// OnError, if set, is called with every error of the writer (a failed
	// batch is kept and retried on the next flush). It is called on the
	// writer's goroutine and must not block. Nil drops them; Stats counts
	// them.
	OnError func(error)
}

// normalize returns o with every default filled in and clamped.
func (o Options) normalize() Options {
	o.BusyTimeout = clampDur(o.BusyTimeout, defaultBusyTimeout, time.Millisecond, time.Minute)
	o.FlushInterval = clampDur(o.FlushInterval, defaultFlushInterval, time.Millisecond, time.Minute)
	o.MaxBatch = clampInt(o.MaxBatch, defaultMaxBatch, 1, 100_000)
	o.MaxPending = clampInt(o.MaxPending, defaultMaxPending, 16, 10_000_000)
	o.Retention = clampDur(o.Retention, defaultRetention, time.Minute, 365*24*time.Hour)
	o.SweepInterval = clampDur(o.SweepInterval, defaultSweepInterval, time.Second, 24*time.Hour)
	if o.Clock == nil {
		o.Clock = time.Now
	}
	return o
}

func clampDur(d, def, lo, hi time.Duration) time.Duration {
	if d <= 0 {
		return def
	}
	return min(max(d, lo), hi)
}

func clampInt(n, def, lo, hi int) int {
	if n <= 0 {
		return def
	}
	return min(max(n, lo), hi)
}

// State is one state file: the lease store written through and the
// efficiency layers' state written behind. Create it with Open; it is safe
// for concurrent use.
type State struct {
	path string
	opt  Options

	wmu sync.Mutex // serialises every write transaction on wconn
	wdb *sql.DB    // one connection, for writes
	rdb *sql.DB    // query-only connections, for lease reads

	leases *leaseStore
	ob     *outbox

	cooldowns *cooldownStore
	pins      *pinStore
	polled    polled

	lastSweep time.Time // writer's last sweep; guarded by wmu

	runMu   sync.Mutex
	running bool
	stop    chan struct{} // closed by Close
	runDone chan struct{} // closed when a Run returns; nil when none is running
	closed  bool

	stats statsCounters
}

// Open opens the state file at path, creating it (mode 0600) when it does not
// exist, applies the schema migrations it lacks and loads the efficiency
// state it holds into memory (dropping what has expired at Options.Clock).
// A file that is not a state database, is damaged or cannot be opened is an
// error naming the file that wraps ErrUnreadable; it is left untouched
// unless Options.Reset is set. The returned State starts no goroutine: call
// Run for the writer and Close at the end.
func Open(path string, o Options) (*State, error) {
	o = o.normalize()
	if path == "" || path == ":memory:" || strings.HasPrefix(path, "file:") || strings.ContainsRune(path, '?') {
		return nil, fmt.Errorf("sqlitestate: %q is not a plain file path", path)
	}
	if o.Reset {
		for _, p := range []string{path, path + "-wal", path + "-shm", path + "-journal"} {
			if err := os.Remove(p); err != nil && !errors.Is(err, fs.ErrNotExist) {
				return nil, fmt.Errorf("sqlitestate: reset %s: %w", path, err)
			}
		}
	}
	if err := createFile(path); err != nil {
		return nil, err
	}
	s := &State{path: path, opt: o, stop: make(chan struct{})}
	if err := s.open(); err != nil {
		s.closeDBs()
		return nil, err
	}
	s.ob = newOutbox(o.MaxPending, &s.stats)
	s.leases = &leaseStore{s: s}
	err := s.leases.prepare()
	if err == nil {
		err = s.leases.loadOccupancy()
	}
	if err != nil {
		s.closeDBs()
		return nil, s.unreadable(err)
	}
	s.cooldowns = newCooldownStore(s.ob)
	s.pins = newPinStore(s.ob)
	if err := s.load(); err != nil {
		s.closeDBs()
		return nil, s.unreadable(err)
	}
	return s, nil
}

// createFile makes path with mode 0600 when it does not exist, and checks
// that an existing path is a regular file this process can read and write.
func createFile(path string) error {
	f, err := os.OpenFile(path, os.O_RDWR|os.O_CREATE, 0o600)
	if err != nil {
		return fmt.Errorf("sqlitestate: open %s: %w: %w", path, ErrUnreadable, err)
	}
	defer f.Close()
	fi, err := f.Stat()
	if err != nil {
		return fmt.Errorf("sqlitestate: open %s: %w: %w", path, ErrUnreadable, err)
	}
	if !fi.Mode().IsRegular() {
		return fmt.Errorf("sqlitestate: open %s: %w: not a regular file", path, ErrUnreadable)
	}
	return nil
}

// unreadable wraps err as an error of the file.
func (s *State) unreadable(err error) error {
	if errors.Is(err, ErrUnreadable) || errors.Is(err, ErrNewerSchema) {
		return err
	}
	return fmt.Errorf("sqlitestate: open %s: %w: %w (Options.Reset deletes it and starts empty)", s.path, ErrUnreadable, err)
}

// dsn returns the driver's name for the file with the given pragmas.
func (s *State) dsn(extra ...string) string {
	sync := "FULL"
	if s.opt.RelaxedSync {
		sync = "NORMAL"
	}
	q := []string{
		"_pragma=busy_timeout(" + strconv.FormatInt(s.opt.BusyTimeout.Milliseconds(), 10) + ")",
		"_pragma=foreign_keys(1)",
		"_pragma=synchronous(" + sync + ")",
	}
	return s.path + "?" + strings.Join(append(q, extra...), "&")
}

// open opens both connection pools, checks the file and migrates it.
func (s *State) open() error {
	var err error
	s.wdb, err = sql.Open(driverName, s.dsn("_txlock=immediate", "_pragma=journal_mode(WAL)"))
	if err != nil {
		return s.unreadable(err)
	}
	s.wdb.SetMaxOpenConns(1)
	s.wdb.SetMaxIdleConns(1)
	s.wdb.SetConnMaxLifetime(0)
	s.wdb.SetConnMaxIdleTime(0)
	ctx := context.Background()
	var mode string
	if err := s.wdb.QueryRowContext(ctx, "PRAGMA journal_mode").Scan(&mode); err != nil {
		return s.unreadable(err)
	}
	if !strings.EqualFold(mode, "wal") {
		return s.unreadable(fmt.Errorf("journal mode is %q, not wal", mode))
	}
	var check string
	if err := s.wdb.QueryRowContext(ctx, "PRAGMA quick_check(1)").Scan(&check); err != nil {
		return s.unreadable(err)
	}
	if check != "ok" {
		return s.unreadable(fmt.Errorf("integrity check: %s", check))
	}
	if err := migrate(ctx, s.wdb, s.path); err != nil {
		return err
	}
	s.rdb, err = sql.Open(driverName, s.dsn("_pragma=query_only(1)"))
	if err != nil {
		return s.unreadable(err)
	}
	s.rdb.SetMaxOpenConns(readConns)
	s.rdb.SetMaxIdleConns(readConns)
	s.rdb.SetConnMaxLifetime(0)
	s.rdb.SetConnMaxIdleTime(0)
	if err := s.rdb.PingContext(ctx); err != nil {
		return s.unreadable(err)
	}
	return nil
}

func (s *State) closeDBs() error {
	var errs []error
	if s.leases != nil {
		errs = append(errs, s.leases.close())
	}
	if s.rdb != nil {
		errs = append(errs, s.rdb.Close())
	}
	if s.wdb != nil {
		errs = append(errs, s.wdb.Close())
	}
	return errors.Join(errs...)
}

// Path returns the file the State was opened on.
func (s *State) Path() string { return s.path }

// Run is the writer: until ctx is done or Close is called, it writes the
// outbox every Options.FlushInterval (earlier when the outbox holds
// Options.MaxBatch keys) and runs the retention sweep every
// Options.SweepInterval. It runs on the caller's goroutine (start it with
// go st.Run(ctx)); the package starts no goroutine of its own. Before it
// returns it writes what is pending. It returns nil when stopped by Close
// or ctx, ErrRunning when another Run is in progress and ErrClosed after
// Close.
func (s *State) Run(ctx context.Context) error {
	s.runMu.Lock()
	if s.closed {
		s.runMu.Unlock()
		return ErrClosed
	}
	if s.running {
		s.runMu.Unlock()
		return ErrRunning
	}
	s.running = true
	done := make(chan struct{})
	s.runDone = done
	s.runMu.Unlock()
	defer func() {
		s.runMu.Lock()
		s.running = false
		s.runDone = nil
		s.runMu.Unlock()
		close(done)
	}()

	tick := time.NewTicker(s.opt.FlushInterval)
	defer tick.Stop()
	for {
		select {
		case <-ctx.Done():
			s.flushReport(context.Background())
			return nil
		case <-s.stop:
			s.flushReport(context.Background())
			return nil
		case <-tick.C:
		case <-s.ob.full:
		}
		s.flushReport(ctx)
		now := s.opt.Clock()
		s.wmu.Lock()
		due := s.lastSweep.IsZero() || now.Sub(s.lastSweep) >= s.opt.SweepInterval || now.Before(s.lastSweep)
		s.wmu.Unlock()
		if due {
			if _, err := s.Sweep(ctx); err != nil {
				s.report(err)
			}
		}
	}
}

func (s *State) flushReport(ctx context.Context) {
	if err := s.Flush(ctx); err != nil {
		s.report(err)
	}
}

func (s *State) report(err error) {
	s.stats.errors.Add(1)
	if s.opt.OnError != nil && err != nil {
		s.opt.OnError(err)
	}
}

// Close stops a running Run and waits for it to return (it writes what is
// pending first), writes the outbox itself when no Run is in progress, and
// closes the file. It is idempotent; after it every lease operation fails
// with ErrClosed and changes of the layers are no longer persisted.
func (s *State) Close() error {
	s.runMu.Lock()
	if s.closed {
		s.runMu.Unlock()
		return nil
	}
	s.closed = true
	close(s.stop)
	done := s.runDone
	s.runMu.Unlock()
	var errs []error
	if done != nil {
		<-done
	} else {
		errs = append(errs, s.Flush(context.Background()))
	}
	s.wmu.Lock()
	defer s.wmu.Unlock()
	s.leases.closed.Store(true)
	errs = append(errs, s.closeDBs())
	return errors.Join(errs...)
}

// Stats are counters of a State since Open.
type Stats struct {
	// Pending is the number of keys waiting in the outbox.
	Pending int
	// Queued is the number of changes the layers handed to the outbox
	// (Written/Queued is the write amplification: below 1 when changes of
	// one key coalesce).
	Queued int64
	// Written is the number of rows the writer wrote or deleted.
	Written int64
	// Batches is the number of write transactions of the outbox.
	Batches int64
	// Dropped is the number of changes not persisted because the outbox
	// was full.
	Dropped int64
	// Errors is the number of failed writer operations.
	Errors int64
	// Swept is the number of rows deleted by the retention sweep.
	Swept int64
}

// Stats returns the State's counters.
func (s *State) Stats() Stats {
	return Stats{
		Pending: s.ob.len(),
		Queued:  s.stats.queued.Load(),
		Written: s.stats.written.Load(),
		Batches: s.stats.batches.Load(),
		Dropped: s.stats.dropped.Load(),
		Errors:  s.stats.errors.Load(),
		Swept:   s.stats.swept.Load(),
	}
}
