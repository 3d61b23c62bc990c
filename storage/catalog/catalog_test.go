package catalog

import (
	"bytes"
	"context"
	"errors"
	"io/fs"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/mfhq/mf/storage/eventlog"
)

// Integration tests: the catalog on the real embedded log (NATS JetStream
// with file storage on t.TempDir()).

// wait is the generous deadline for anything that crosses the log.
const wait = 30 * time.Second

type testLog struct {
	*eventlog.Log
	dir string
}

func openTestLog(t testing.TB, dir string) *testLog {
	t.Helper()
	cfg := eventlog.DefaultConfig()
	cfg.Dir = dir
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	l, err := eventlog.Open(ctx, cfg, testLogger(t))
	if err != nil {
		t.Fatalf("cannot open the embedded log: %v", err)
	}
	t.Cleanup(func() { _ = l.Close() })
	return &testLog{Log: l, dir: dir}
}

// catalogLog wires the catalog to the log the way cmd/mf does: a replay
// subscriber, so that every catalog reads the whole topic.
func catalogLog(t testing.TB, l *testLog) Log {
	t.Helper()
	sub, err := l.Subscriber(eventlog.DefaultSubscriberConfig(""))
	if err != nil {
		t.Fatalf("cannot make a replay subscriber: %v", err)
	}
	t.Cleanup(func() { _ = sub.Close() })
	return Log{Publisher: l.Publisher(), Subscriber: sub, LastSeq: l.LastSeq, Seq: eventlog.Seq}
}

func openTestCatalog(t testing.TB, l *testLog, cfg Config) *Catalog {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	c, err := Open(ctx, cfg, catalogLog(t, l), testLogger(t))
	if err != nil {
		t.Fatalf("cannot open the catalog: %v", err)
	}
	t.Cleanup(func() { _ = c.Close() })
	return c
}

func apply(t testing.TB, c *Catalog, name string) *Result {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), wait)
	defer cancel()
	res, err := c.Apply(ctx, readTestdata(t, name))
	if err != nil {
		t.Fatalf("apply %s: %v", name, err)
	}
	return res
}

func lastSeq(t testing.TB, l *testLog) uint64 {
	t.Helper()
	seq, err := l.LastSeq(context.Background(), "catalog")
	if err != nil {
		t.Fatal(err)
	}
	return seq
}

// waitFor polls until cond holds, failing after the deadline.
func waitFor(t testing.TB, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(wait)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("%s: not within %s", what, wait)
		}
		time.Sleep(5 * time.Millisecond)
	}
}

// Apply appends, the same file again appends nothing, and a restart on the
// same log directory folds the same state back, generated seeds and refs
// included.
func TestApplyIdempotentAndRestart(t *testing.T) {
	dir := t.TempDir()
	l := openTestLog(t, dir)
	c := openTestCatalog(t, l, DefaultConfig())
	if v := c.State().Version(); v != 0 {
		t.Fatalf("empty log: version %d", v)
	}
	res := apply(t, c, "valid/full.json")
	if len(res.Changes) == 0 || res.Version == 0 || c.State().Version() != res.Version {
		t.Fatalf("result %+v, state version %d", res, c.State().Version())
	}
	if _, ok := c.State().SourceByKey("mf_shopweb1_Website-Key_1"); !ok {
		t.Fatal("applied source not visible on return")
	}
	seq := lastSeq(t, l)
	again := apply(t, c, "valid/full.json")
	if len(again.Changes) != 0 || lastSeq(t, l) != seq || again.Version != res.Version {
		t.Fatalf("same file again: %+v, log %d -> %d", again, seq, lastSeq(t, l))
	}
	apply(t, c, "merge/update.json")
	before := dump(t, c.State())
	version := c.State().Version()
	c.Close()
	l.Close()

	l2 := openTestLog(t, dir)
	c2 := openTestCatalog(t, l2, DefaultConfig())
	if got := dump(t, c2.State()); got != before {
		t.Errorf("state after restart differs:\ngot\n%s\nwant\n%s", got, before)
	}
	if c2.State().Version() != version {
		t.Errorf("version after restart %d, want %d", c2.State().Version(), version)
	}
	if res := apply(t, c2, "merge/update.json"); len(res.Changes) != 0 {
		t.Errorf("re-applying after restart changed %q", res.Changes)
	}
}

// Two catalogs on one log see each other's changes, applies and runtime
// facts alike, and agree on the state.
func TestTwoCatalogs(t *testing.T) {
	l := openTestLog(t, t.TempDir())
	a := openTestCatalog(t, l, DefaultConfig())
	b := openTestCatalog(t, l, DefaultConfig())

	start := time.Now()
	res := apply(t, a, "valid/full.json")
	if _, err := b.WaitVersion(context.Background(), res.Version); err != nil {
		t.Fatal(err)
	}
	t.Logf("apply on one catalog visible on the other after %s", time.Since(start))
	if dump(t, a.State()) != dump(t, b.State()) {
		t.Fatal("the catalogs disagree")
	}

	res = apply(t, b, "merge/update.json")
	waitFor(t, "update from b visible in a", func() bool { return a.State().Version() >= res.Version })
	if _, ok := a.State().Segment("60000000-0000-4000-8000-000000000005"); !ok {
		t.Fatal("segment created through b not in a")
	}

	const server = "30000000-0000-4000-8000-000000000002"
	ctx, cancel := context.WithTimeout(context.Background(), wait)
	defer cancel()
	if err := b.MarkSecretKeyExposed(ctx, server); err != nil {
		t.Fatal(err)
	}
	if !b.State().SecretKeyExposed(server) {
		t.Fatal("exposure not visible where it was marked")
	}
	waitFor(t, "exposure visible in a", func() bool { return a.State().SecretKeyExposed(server) })
	if dump(t, a.State()) != dump(t, b.State()) {
		t.Fatal("the catalogs disagree")
	}
}

// Concurrent applies from two processes: both take effect (the loser plans
// again on the winner's catalog), and both processes end with one state.
func TestConcurrentApplies(t *testing.T) {
	l := openTestLog(t, t.TempDir())
	a := openTestCatalog(t, l, DefaultConfig())
	b := openTestCatalog(t, l, DefaultConfig())
	apply(t, a, "valid/full.json")
	waitFor(t, "b catches up", func() bool { return b.State().Version() == a.State().Version() })

	files := []string{"merge/update.json", "valid/minimal.json", "valid/unknown-fields.json", "../../../docs/demo-provision.json"}
	var wg sync.WaitGroup
	var mu sync.Mutex
	final := uint64(0)
	for _, c := range []*Catalog{a, b} {
		for _, name := range files {
			wg.Add(1)
			go func() {
				defer wg.Done()
				ctx, cancel := context.WithTimeout(context.Background(), wait)
				defer cancel()
				res, err := c.Apply(ctx, readTestdata(t, name))
				if err != nil {
					t.Error(err)
					return
				}
				mu.Lock()
				final = max(final, res.Version)
				mu.Unlock()
			}()
		}
	}
	wg.Wait()
	// The last transaction that took effect: both catalogs get there.
	waitFor(t, "both catalogs at the last change", func() bool {
		return a.State().Version() == final && b.State().Version() == final
	})
	if dump(t, a.State()) != dump(t, b.State()) {
		t.Fatal("the catalogs disagree")
	}
	for _, name := range files {
		if res := apply(t, a, name); len(res.Changes) != 0 {
			t.Errorf("%s not fully applied: %q", name, res.Changes)
		}
	}
	if _, ok := a.State().Flag("20000000-0000-4000-8000-000000000008", "future-flag"); !ok {
		t.Error("a file applied concurrently is missing")
	}
}

// A refused file appends nothing and leaves the state as it was, on the
// real log, for every invalid case.
func TestInvalidFilesOnLog(t *testing.T) {
	cases := loadInvalidCases(t)
	groups := map[string][]string{}
	for name, c := range cases {
		key := strings.Join(c.State, ",")
		groups[key] = append(groups[key], name)
	}
	for key, names := range groups {
		l := openTestLog(t, t.TempDir())
		c := openTestCatalog(t, l, DefaultConfig())
		for _, f := range strings.Split(key, ",") {
			if f != "" {
				apply(t, c, f)
			}
		}
		for _, name := range names {
			t.Run(name, func(t *testing.T) {
				st, seq := c.State(), lastSeq(t, l)
				ctx, cancel := context.WithTimeout(context.Background(), wait)
				defer cancel()
				_, err := c.Apply(ctx, cases[name].build(t))
				checkFaults(t, err, cases[name])
				if c.State() != st || lastSeq(t, l) != seq {
					t.Errorf("refused file changed the catalog: version %d -> %d, log %d -> %d",
						st.Version(), c.State().Version(), seq, lastSeq(t, l))
				}
			})
		}
	}
}

// Secret keys and API tokens never reach the log's files; website keys,
// which are public, do (which shows the search can see plain text).
func TestHashesOnlyAtRest(t *testing.T) {
	dir := t.TempDir()
	l := openTestLog(t, dir)
	c := openTestCatalog(t, l, DefaultConfig())
	apply(t, c, "valid/full.json")
	apply(t, c, "merge/update.json")
	ctx, cancel := context.WithTimeout(context.Background(), wait)
	defer cancel()
	if err := c.MarkSecretKeyExposed(ctx, "30000000-0000-4000-8000-000000000002"); err != nil {
		t.Fatal(err)
	}
	c.Close()
	l.Close()

	var files [][]byte
	err := filepath.WalkDir(dir, func(path string, d fs.DirEntry, err error) error {
		if err != nil || d.IsDir() {
			return err
		}
		data, err := os.ReadFile(path)
		files = append(files, data)
		return err
	})
	if err != nil {
		t.Fatal(err)
	}
	contains := func(s string) bool {
		for _, f := range files {
			if bytes.Contains(f, []byte(s)) {
				return true
			}
		}
		return false
	}
	for _, public := range []string{"mf_shopweb1_Website-Key_1", "mf_shopweb1_Website-Key_2", "svc_legacy01_Old-Key"} {
		if !contains(public) {
			t.Fatalf("website key %s not found in the log's files: the search cannot see plain text", public)
		}
	}
	secrets := []string{
		"mf_shopsrv1_S3cret-Server-Key_xyzXYZ0123456789",
		"svc_legacy02_0ld_Secret-Key_abcdefghijkl",
		"mf_betasrv1_Another-Secret-Key_000111222333",
		"mf_pat_ada00001_A1b2C3d4E5f6G7h8I9j0K1l2M3n4O5p6Q7r8S9t0",
		"mf_pat_ada00002_ZZZZZZZZZZZZZZZZZZZZZZZZZZZZZZZZZZZZZZZZ",
		"mf_pat_bob00001_0123456789abcdefghijABCDEFGHIJ0123456789",
		"mf_pat_som00001_SSSSSSSSSSSSSSSSSSSSSSSSSSSSSSSSSSSSSSSS",
	}
	for _, s := range secrets {
		if !bytes.Contains(readTestdata(t, "valid/full.json"), []byte(s)) && !bytes.Contains(readTestdata(t, "merge/update.json"), []byte(s)) {
			t.Fatalf("secret %s is not in the applied files", s)
		}
		if contains(s) {
			t.Errorf("a secret (%s…) is stored in plain in the log's files", s[:12])
		}
		// The secret part alone must not be there either.
		if rest := s[strings.LastIndexByte(s[:len(s)-8], '_')+1:]; len(rest) >= 20 && contains(rest) {
			t.Errorf("the secret part of %s… is stored in the log's files", s[:12])
		}
		if !contains(HashToken(s)) {
			t.Errorf("the hash of %s… is not in the log's files", s[:12])
		}
	}
}

func TestMarkSecretKeyExposed(t *testing.T) {
	dir := t.TempDir()
	l := openTestLog(t, dir)
	c := openTestCatalog(t, l, DefaultConfig())
	apply(t, c, "valid/full.json")
	ctx, cancel := context.WithTimeout(context.Background(), wait)
	defer cancel()
	const server, website = "30000000-0000-4000-8000-000000000002", "30000000-0000-4000-8000-000000000001"

	if c.State().SecretKeyExposed(server) {
		t.Fatal("exposed before marking")
	}
	if err := c.MarkSecretKeyExposed(ctx, server); err != nil {
		t.Fatal(err)
	}
	seq := lastSeq(t, l)
	if err := c.MarkSecretKeyExposed(ctx, server); err != nil || lastSeq(t, l) != seq {
		t.Fatalf("marking again: %v, log %d -> %d", err, seq, lastSeq(t, l))
	}
	if err := c.MarkSecretKeyExposed(ctx, website); !errors.Is(err, ErrNotSecretKey) {
		t.Errorf("website source: %v, want ErrNotSecretKey", err)
	}
	if err := c.MarkSecretKeyExposed(ctx, "30000000-0000-4000-8000-000000000099"); !errors.Is(err, ErrNotFound) {
		t.Errorf("unknown source: %v, want ErrNotFound", err)
	}
	if c.State().SecretKeyExposed("30000000-0000-4000-8000-000000000004") {
		t.Error("another key is exposed too")
	}
	c.Close()
	l.Close()

	l2 := openTestLog(t, dir)
	c2 := openTestCatalog(t, l2, DefaultConfig())
	if !c2.State().SecretKeyExposed(server) {
		t.Fatal("exposure lost in a restart")
	}
	// Provisioning a new key for the source starts it unexposed; the
	// provisioning change does not clear the mark of the old key.
	file := readTestdata(t, "valid/full.json")
	file = bytes.Replace(file, []byte("mf_shopsrv1_S3cret-Server-Key_xyzXYZ0123456789"), []byte("mf_shopsrv2_N3w-Server-Key_abcdefghijklmnopqrst"), 1)
	if _, err := c2.Apply(ctx, file); err != nil {
		t.Fatal(err)
	}
	if c2.State().SecretKeyExposed(server) {
		t.Error("a new key is exposed")
	}
	if src, ok := c2.State().SourceByKey("mf_shopsrv2_N3w-Server-Key_abcdefghijklmnopqrst"); !ok || src.ID != server {
		t.Error("new key not found")
	}
}

// A transaction split into many log messages takes effect as one.
func TestSplitTransaction(t *testing.T) {
	l := openTestLog(t, t.TempDir())
	cfg := DefaultConfig()
	cfg.MaxRecordBytes = 1024
	c := openTestCatalog(t, l, cfg)
	st := c.State()
	res := apply(t, c, "valid/full.json")
	if seq := lastSeq(t, l); seq < 5 {
		t.Fatalf("%d changes in %d messages; want several messages", len(res.Changes), seq)
	}
	if !(st.Version() == 0 && c.State().Version() == lastSeq(t, l)) {
		t.Fatalf("version %d, log at %d", c.State().Version(), lastSeq(t, l))
	}
	other := openTestCatalog(t, l, DefaultConfig())
	if dump(t, other.State()) != dump(t, c.State()) {
		t.Fatal("a catalog opened later disagrees")
	}
}

// The State is replaced on change: Stale closes, WaitVersion returns.
func TestStateNotification(t *testing.T) {
	l := openTestLog(t, t.TempDir())
	c := openTestCatalog(t, l, DefaultConfig())
	st := c.State()
	select {
	case <-st.Stale():
		t.Fatal("stale before any change")
	default:
	}
	done := make(chan *State, 1)
	go func() {
		ctx, cancel := context.WithTimeout(context.Background(), wait)
		defer cancel()
		next, err := c.WaitVersion(ctx, 1)
		if err != nil {
			t.Error(err)
		}
		done <- next
	}()
	apply(t, c, "valid/minimal.json")
	select {
	case <-st.Stale():
	case <-time.After(wait):
		t.Fatal("Stale not closed after a change")
	}
	if next := <-done; next == nil || next.Version() == 0 {
		t.Fatal("WaitVersion returned no newer state")
	}
}

// CheckDocuments sees the State an apply leads to and can refuse it.
func TestCheckDocumentsHook(t *testing.T) {
	l := openTestLog(t, t.TempDir())
	cfg := DefaultConfig()
	var seen *State
	cfg.CheckDocuments = func(st *State) error {
		seen = st
		if _, ok := st.Flag("20000000-0000-4000-8000-000000000001", "no-seed"); ok {
			return &ValidationError{Faults: []Fault{{Path: "organizations[0].projects[0].flags", Message: "values document too large"}}}
		}
		return nil
	}
	c := openTestCatalog(t, l, cfg)
	apply(t, c, "valid/minimal.json")
	if seen == nil {
		t.Fatal("hook not called")
	}
	if _, ok := seen.Organization("10000000-0000-4000-8000-000000000009"); !ok {
		t.Fatal("hook did not see the planned state")
	}
	seq := lastSeq(t, l)
	_, err := c.Apply(context.Background(), readTestdata(t, "valid/full.json"))
	var ve *ValidationError
	if !errors.As(err, &ve) || len(ve.Faults) != 1 || ve.Faults[0].Message != "values document too large" {
		t.Fatalf("hook refusal: %v", err)
	}
	if lastSeq(t, l) != seq {
		t.Fatal("a refused file was appended")
	}
}

func TestConfigValidate(t *testing.T) {
	if err := DefaultConfig().Validate(); err != nil {
		t.Fatal(err)
	}
	for _, mod := range []func(*Config){
		func(c *Config) { c.Topic = "" },
		func(c *Config) { c.ApplyTimeout = 0 },
		func(c *Config) { c.MaxApplyAttempts = 0 },
		func(c *Config) { c.MaxRecordBytes = 10 },
		func(c *Config) { c.ResubscribeDelay = -1 },
	} {
		cfg := DefaultConfig()
		mod(&cfg)
		if err := cfg.Validate(); err == nil {
			t.Errorf("%+v accepted", cfg)
		}
	}
}
