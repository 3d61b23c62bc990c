package enrich

import (
	"bufio"
	"bytes"
	"context"
	"encoding/hex"
	"errors"
	"fmt"
	"net/netip"
	"os"
	"os/exec"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/mfhq/mf/internal/apptest"
	"github.com/mfhq/mf/storage"
)

// fixedNow is noon UTC of the day the tests hash on.
var fixedNow = time.Date(2026, 3, 1, 12, 0, 0, 0, time.UTC)

const safariIPhone = "Mozilla/5.0 (iPhone; CPU iPhone OS 17_4_1 like Mac OS X) AppleWebKit/605.1.15 (KHTML, like Gecko) Version/17.4.1 Mobile/15E148 Safari/604.1"

func consentless(project string) Source {
	return Source{ProjectID: project, Website: true, Consentless: true}
}

func hashOf(t *testing.T, e *Enricher, peer, ua, project string, now time.Time) string {
	t.Helper()
	edge, err := e.Enrich(t.Context(), RequestFacts{Peer: netip.MustParseAddr(peer), UserAgent: ua}, consentless(project), now)
	if err != nil {
		t.Fatalf("Enrich: %v", err)
	}
	if len(edge.VisitorHash) != VisitorHashLen {
		t.Fatalf("visitor hash %q is not %d characters", edge.VisitorHash, VisitorHashLen)
	}
	return edge.VisitorHash
}

// saltKeys lists the salt objects in b.
func saltKeys(t *testing.T, b storage.Bucket) []string {
	t.Helper()
	var keys []string
	err := b.List(t.Context(), SaltPrefix, func(o storage.ObjectInfo) error {
		keys = append(keys, strings.TrimPrefix(o.Key, SaltPrefix))
		return nil
	})
	if err != nil {
		t.Fatalf("List: %v", err)
	}
	return keys
}

// TestVisitorHashVectors checks the hash against vectors computed
// independently (testdata/visitor_hash.tsv), with the salt placed in a real
// bucket the way BucketSaltStore keeps it.
func TestVisitorHashVectors(t *testing.T) {
	for i, c := range readTSV(t, "visitor_hash.tsv", 6) {
		saltHex, day, project, addr, ua, want := c[0], c[1], c[2], c[3], c[4], c[5]
		t.Run(fmt.Sprint(i), func(t *testing.T) {
			salt, err := hex.DecodeString(saltHex)
			if err != nil || len(salt) != SaltSize {
				t.Fatalf("bad salt in test data: %v", err)
			}
			b := apptest.OpenBucket(t, t.TempDir())
			if _, err := b.Put(t.Context(), SaltPrefix+day, bytes.NewReader(salt)); err != nil {
				t.Fatal(err)
			}
			e, err := New(DefaultConfig(), NewBucketSaltStore(b), nil)
			if err != nil {
				t.Fatal(err)
			}
			d, err := time.Parse(dayLayout, day)
			if err != nil {
				t.Fatal(err)
			}
			if got := hashOf(t, e, addr, ua, project, d.Add(13*time.Hour)); got != want {
				t.Errorf("hash = %s, want %s", got, want)
			}
		})
	}
}

// TestVisitorHashScope: one visitor, one project, one day: one hash, from
// any Enricher sharing the store; another project, day, User-Agent or
// network: another hash.
func TestVisitorHashScope(t *testing.T) {
	dir := t.TempDir()
	e1, err := New(DefaultConfig(), NewBucketSaltStore(apptest.OpenBucket(t, dir)), nil)
	if err != nil {
		t.Fatal(err)
	}
	e2, err := New(DefaultConfig(), NewBucketSaltStore(apptest.OpenBucket(t, dir)), nil)
	if err != nil {
		t.Fatal(err)
	}
	h := hashOf(t, e1, "203.0.113.7", safariIPhone, "proj_a", fixedNow)
	if got := hashOf(t, e2, "203.0.113.7", safariIPhone, "proj_a", fixedNow.Add(11*time.Hour)); got != h {
		t.Errorf("second process, same day: %s, want %s", got, h)
	}
	if got := hashOf(t, e1, "::ffff:203.0.113.7", safariIPhone, "proj_a", fixedNow); got != h {
		t.Errorf("IPv4-mapped form of the address: %s, want %s", got, h)
	}
	if hashOf(t, e1, "2001:db8:1:2::1", safariIPhone, "proj_a", fixedNow) != hashOf(t, e2, "2001:db8:1:2:ffff::9", safariIPhone, "proj_a", fixedNow) {
		t.Errorf("two addresses of one IPv6 /64 hash differently")
	}
	others := map[string]string{
		"other project":    hashOf(t, e1, "203.0.113.7", safariIPhone, "proj_b", fixedNow),
		"other address":    hashOf(t, e1, "203.0.113.8", safariIPhone, "proj_a", fixedNow),
		"other User-Agent": hashOf(t, e1, "203.0.113.7", firefox, "proj_a", fixedNow),
		"other /64":        hashOf(t, e1, "2001:db8:1:3::1", safariIPhone, "proj_a", fixedNow),
	}
	for what, got := range others {
		if got == h {
			t.Errorf("%s gives the same hash", what)
		}
	}
	// The next UTC day: a new salt, so a new hash, in both processes.
	next := fixedNow.Add(24 * time.Hour)
	h2 := hashOf(t, e2, "203.0.113.7", safariIPhone, "proj_a", next)
	if h2 == h {
		t.Errorf("the next day gives the same hash")
	}
	if got := hashOf(t, e1, "203.0.113.7", safariIPhone, "proj_a", next); got != h2 {
		t.Errorf("next day, other process: %s, want %s", got, h2)
	}
}

// TestVisitorHashDayBoundary: salt days are UTC days, whatever the zone of
// the time given.
func TestVisitorHashDayBoundary(t *testing.T) {
	e := newEnricher(t, DefaultConfig())
	berlin := time.FixedZone("UTC+1", 3600)
	lastInstant := time.Date(2026, 3, 1, 23, 59, 59, 999_999_999, time.UTC)
	h := hashOf(t, e, "203.0.113.7", firefox, "p", fixedNow)
	same := []time.Time{
		time.Date(2026, 3, 1, 0, 0, 0, 0, time.UTC),
		lastInstant,
		time.Date(2026, 3, 2, 0, 30, 0, 0, berlin), // 23:30 UTC on the 1st
	}
	for _, at := range same {
		if got := hashOf(t, e, "203.0.113.7", firefox, "p", at); got != h {
			t.Errorf("at %v: hash differs from noon UTC of the same UTC day", at)
		}
	}
	if hashOf(t, e, "203.0.113.7", firefox, "p", lastInstant.Add(time.Nanosecond)) == h {
		t.Errorf("midnight UTC does not change the hash")
	}
	if got := DayKey(time.Date(2026, 3, 2, 0, 30, 0, 0, berlin)); got != "2026-03-01" {
		t.Errorf("DayKey = %s, want the UTC date 2026-03-01", got)
	}
}

// TestSaltStore: a salt is created once and read back by every store over
// the bucket; days differ; bad day keys and corrupt salts are refused.
func TestSaltStore(t *testing.T) {
	dir := t.TempDir()
	s1 := NewBucketSaltStore(apptest.OpenBucket(t, dir))
	s2 := NewBucketSaltStore(apptest.OpenBucket(t, dir))
	a, err := s1.Salt(t.Context(), "2026-03-01")
	if err != nil {
		t.Fatal(err)
	}
	if len(a) != SaltSize || bytes.Equal(a, make([]byte, SaltSize)) {
		t.Fatalf("salt %x is not %d random bytes", a, SaltSize)
	}
	b, err := s2.Salt(t.Context(), "2026-03-01")
	if err != nil {
		t.Fatal(err)
	}
	if !bytes.Equal(a, b) {
		t.Errorf("second store reads another salt")
	}
	c, err := s1.Salt(t.Context(), "2026-03-02")
	if err != nil {
		t.Fatal(err)
	}
	if bytes.Equal(a, c) {
		t.Errorf("two days have the same salt")
	}

	for _, bad := range []string{"", "2026-3-1", "2026-13-01", "2026-02-30", "../x", "20260301"} {
		if _, err := s1.Salt(t.Context(), bad); !errors.Is(err, ErrInvalidDay) {
			t.Errorf("Salt(%q): err = %v, want ErrInvalidDay", bad, err)
		}
		if err := s1.DeleteBefore(t.Context(), bad); !errors.Is(err, ErrInvalidDay) {
			t.Errorf("DeleteBefore(%q): err = %v, want ErrInvalidDay", bad, err)
		}
	}

	bucket := apptest.OpenBucket(t, dir)
	for _, size := range []int{0, 5, SaltSize + 1} {
		if _, err := bucket.Put(t.Context(), SaltPrefix+"2026-04-01", bytes.NewReader(make([]byte, size))); err != nil {
			t.Fatal(err)
		}
		if _, err := s1.Salt(t.Context(), "2026-04-01"); !errors.Is(err, ErrCorruptSalt) {
			t.Errorf("salt of %d bytes: err = %v, want ErrCorruptSalt", size, err)
		}
		e, err := New(DefaultConfig(), s1, nil)
		if err != nil {
			t.Fatal(err)
		}
		_, err = e.Enrich(t.Context(), RequestFacts{Peer: peer, UserAgent: firefox}, consentless("p"), time.Date(2026, 4, 1, 1, 0, 0, 0, time.UTC))
		if !errors.Is(err, ErrCorruptSalt) {
			t.Errorf("Enrich with a salt of %d bytes: err = %v, want ErrCorruptSalt", size, err)
		}
	}
}

// TestSaltStoreRace: many goroutines, each with its own handle on the
// bucket directory, ask for the same new day at once; all get one salt.
func TestSaltStoreRace(t *testing.T) {
	dir := t.TempDir()
	const n = 16
	stores := make([]*BucketSaltStore, n)
	for i := range stores {
		stores[i] = NewBucketSaltStore(apptest.OpenBucket(t, dir))
	}
	for _, day := range []string{"2026-05-01", "2026-05-02", "2026-05-03"} {
		salts := make([][]byte, n)
		errs := make([]error, n)
		start := make(chan struct{})
		var wg sync.WaitGroup
		for i := range stores {
			wg.Go(func() {
				<-start
				salts[i], errs[i] = stores[i].Salt(context.Background(), day)
			})
		}
		close(start)
		wg.Wait()
		for i := range n {
			if errs[i] != nil {
				t.Fatalf("%s: store %d: %v", day, i, errs[i])
			}
			if !bytes.Equal(salts[i], salts[0]) {
				t.Errorf("%s: store %d got another salt", day, i)
			}
		}
	}
}

// TestSaltsAcrossProcesses starts several processes (this test binary,
// running saltChild; see TestMain) at once on one bucket directory; they must
// all compute the same visitor hash, and so must this process.
func TestSaltsAcrossProcesses(t *testing.T) {
	dir := t.TempDir()
	const procs = 4
	cmds := make([]*exec.Cmd, procs)
	outs := make([]*bytes.Buffer, procs)
	for i := range cmds {
		cmd := exec.CommandContext(t.Context(), os.Args[0])
		cmd.Env = append(os.Environ(), "MF_ENRICH_SALT_DIR="+dir)
		outs[i] = new(bytes.Buffer)
		cmd.Stdout, cmd.Stderr = outs[i], outs[i]
		if err := cmd.Start(); err != nil {
			t.Fatalf("cannot start process %d: %v", i, err)
		}
		cmds[i] = cmd
	}
	var hashes []string
	for i, cmd := range cmds {
		if err := cmd.Wait(); err != nil {
			t.Fatalf("process %d failed: %v\n%s", i, err, outs[i])
		}
		h := ""
		sc := bufio.NewScanner(outs[i])
		for sc.Scan() {
			if v, ok := strings.CutPrefix(sc.Text(), "VISITOR_HASH="); ok {
				h = v
			}
		}
		if len(h) != VisitorHashLen {
			t.Fatalf("process %d printed no hash:\n%s", i, outs[i])
		}
		hashes = append(hashes, h)
	}
	e, err := New(DefaultConfig(), NewBucketSaltStore(apptest.OpenBucket(t, dir)), nil)
	if err != nil {
		t.Fatal(err)
	}
	hashes = append(hashes, hashOf(t, e, "203.0.113.7", firefox, "proj_x", fixedNow))
	for _, h := range hashes[1:] {
		if h != hashes[0] {
			t.Errorf("processes computed different hashes: %v", hashes)
			break
		}
	}
	if keys := saltKeys(t, apptest.OpenBucket(t, dir)); !slices.Equal(keys, []string{"2026-03-01"}) {
		t.Errorf("salt objects %v, want one for 2026-03-01", keys)
	}
}

// TestMain runs this test binary as a child of TestSaltsAcrossProcesses
// when MF_ENRICH_SALT_DIR is set, and as the test suite otherwise.
func TestMain(m *testing.M) {
	if dir := os.Getenv("MF_ENRICH_SALT_DIR"); dir != "" {
		os.Exit(saltChild(dir))
	}
	os.Exit(m.Run())
}

// saltChild opens the bucket in dir, computes the visitor hash of a fixed
// visitor and prints it.
func saltChild(dir string) int {
	ctx := context.Background()
	b, err := storage.Open(ctx, storage.Config{Dir: dir}, nil)
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 1
	}
	defer b.Close()
	e, err := New(DefaultConfig(), NewBucketSaltStore(b), nil)
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 1
	}
	edge, err := e.Enrich(ctx, RequestFacts{Peer: netip.MustParseAddr("203.0.113.7"), UserAgent: firefox}, consentless("proj_x"), fixedNow)
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 1
	}
	fmt.Printf("VISITOR_HASH=%s\n", edge.VisitorHash)
	return 0
}

// TestRotateSalts: rotation keeps exactly today's and tomorrow's salts in
// the store, and holds tomorrow's in memory so that midnight needs no
// store (shown by closing the store first).
func TestRotateSalts(t *testing.T) {
	dir := t.TempDir()
	b := apptest.OpenBucket(t, dir)
	store := NewBucketSaltStore(b)
	for _, d := range []string{"2026-02-26", "2026-02-27", "2026-02-28"} {
		if _, err := store.Salt(t.Context(), d); err != nil {
			t.Fatal(err)
		}
	}
	if _, err := b.Put(t.Context(), SaltPrefix+"README", strings.NewReader("not a salt")); err != nil {
		t.Fatal(err)
	}
	e, err := New(DefaultConfig(), store, nil)
	if err != nil {
		t.Fatal(err)
	}
	if err := e.RotateSalts(t.Context(), fixedNow); err != nil {
		t.Fatalf("RotateSalts: %v", err)
	}
	if got, want := saltKeys(t, b), []string{"2026-03-01", "2026-03-02", "README"}; !slices.Equal(got, want) {
		t.Errorf("salt objects after rotation: %v, want %v", got, want)
	}
	today := hashOf(t, e, "203.0.113.7", firefox, "p", fixedNow)
	tomorrowAt := fixedNow.Add(24 * time.Hour)

	// Another process reads tomorrow's salt from the store.
	other, err := New(DefaultConfig(), NewBucketSaltStore(apptest.OpenBucket(t, dir)), nil)
	if err != nil {
		t.Fatal(err)
	}
	want := hashOf(t, other, "203.0.113.7", firefox, "p", tomorrowAt)

	if err := b.Close(); err != nil {
		t.Fatal(err)
	}
	got := hashOf(t, e, "203.0.113.7", firefox, "p", tomorrowAt)
	if got != want {
		t.Errorf("tomorrow's hash from memory %s, want %s from the store", got, want)
	}
	if got == today {
		t.Errorf("tomorrow's hash equals today's")
	}
	// A request stamped before midnight but handled after the switch uses
	// the new day: the cache never goes back.
	if h := hashOf(t, e, "203.0.113.7", firefox, "p", fixedNow); h != got {
		t.Errorf("late request of the old day: %s, want the new day's %s", h, got)
	}
	// The day after tomorrow is not cached and the store is closed.
	_, err = e.Enrich(t.Context(), RequestFacts{Peer: peer, UserAgent: firefox}, consentless("p"), tomorrowAt.Add(24*time.Hour))
	if !errors.Is(err, storage.ErrClosed) {
		t.Errorf("uncached day with the store closed: err = %v, want storage.ErrClosed", err)
	}
}

// TestRunSalts runs the rotation loop until its context ends.
func TestRunSalts(t *testing.T) {
	b := apptest.OpenBucket(t, t.TempDir())
	e, err := New(DefaultConfig(), NewBucketSaltStore(b), nil)
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(t.Context())
	done := make(chan struct{})
	go func() {
		e.RunSalts(ctx, time.Hour, func() time.Time { return fixedNow })
		close(done)
	}()
	deadline := time.Now().Add(30 * time.Second)
	for {
		if keys := saltKeys(t, b); slices.Equal(keys, []string{"2026-03-01", "2026-03-02"}) {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("RunSalts did not create today's and tomorrow's salts: %v", saltKeys(t, b))
		}
		time.Sleep(10 * time.Millisecond)
	}
	cancel()
	select {
	case <-done:
	case <-time.After(30 * time.Second):
		t.Fatal("RunSalts did not return after its context ended")
	}
}

// TestEnrichErrors: what Enrich refuses, and that errors name no address.
func TestEnrichErrors(t *testing.T) {
	e := newEnricher(t, DefaultConfig())
	r := RequestFacts{Peer: netip.MustParseAddr("203.0.113.7"), UserAgent: firefox}
	if _, err := e.Enrich(t.Context(), r, Source{Website: true, Consentless: true}, fixedNow); !errors.Is(err, ErrNoProject) {
		t.Errorf("consentless without project: err = %v, want ErrNoProject", err)
	}
	edge, err := e.Enrich(t.Context(), r, Source{ProjectID: "p", Website: true}, fixedNow)
	if err != nil || edge.VisitorHash != "" {
		t.Errorf("full website batch: hash %q, err %v; want no hash", edge.VisitorHash, err)
	}

	// A closed store: the error says why and shows no address.
	b := apptest.OpenBucket(t, t.TempDir())
	e2, err := New(DefaultConfig(), NewBucketSaltStore(b), nil)
	if err != nil {
		t.Fatal(err)
	}
	b.Close()
	_, err = e2.Enrich(t.Context(), r, consentless("p"), fixedNow)
	if err == nil {
		t.Fatal("closed store: no error")
	}
	if strings.Contains(err.Error(), "203.0.113") {
		t.Errorf("error shows the address: %v", err)
	}

	if _, err := New(DefaultConfig(), nil, nil); err == nil {
		t.Errorf("New without salt store: no error")
	}
	bad := DefaultConfig()
	bad.UserAgentCacheSize = 1
	bad.TrustedProxies = []netip.Prefix{{}}
	err = bad.Validate()
	if err == nil || !strings.Contains(err.Error(), "--trusted-proxies") || !strings.Contains(err.Error(), "raise it") {
		t.Errorf("Validate = %v, want both problems explained", err)
	}
	if err := DefaultConfig().Validate(); err != nil {
		t.Errorf("DefaultConfig().Validate() = %v", err)
	}
}
