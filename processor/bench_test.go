package processor

import (
	"context"
	"errors"
	"fmt"
	"math"
	"math/rand/v2"
	"os"
	"runtime"
	"runtime/debug"
	"runtime/metrics"
	"runtime/pprof"
	"syscall"
	"testing"
	"time"

	"github.com/mfhq/mf/internal/apptest"
	"github.com/mfhq/mf/rollups"
	"github.com/mfhq/mf/storage/eventlog"
	"github.com/mfhq/mf/storage/records"
)

// traffic generates a typical website's accepted batches: browsers with
// one to a few visits of a few pageviews each, paths and titles from a
// site of a few hundred pages (popular ones more often), referrers on
// landing pages (search, social, other sites, none), some UTM tags and
// click ids, one browser in ten signing in, a few purchases. Events come
// in browser batches of one to a few events, as SDKs send them, in the
// order of their time.
type traffic struct {
	// perVisit sends one batch per visit (an SDK that queues events until
	// the page is hidden); otherwise a batch follows a pageview one time in
	// three (about two events per batch).
	perVisit bool
	project  string
	start    time.Time
	days     int
	r        *rand.Rand
	paths    []string
	titles   []string
	zipf     *rand.Zipf
}

func newTraffic(project string, seed uint64) *traffic {
	t := &traffic{project: project, start: time.Date(2026, 9, 1, 0, 0, 0, 0, time.UTC), days: 3,
		r: rand.New(rand.NewPCG(seed, seed^0x9e3779b97f4a7c15))}
	sections := []string{"products", "blog", "docs", "help", "pricing", "about", "careers", "shop"}
	for i := range 300 {
		s := sections[i%len(sections)]
		t.paths = append(t.paths, fmt.Sprintf("/%s/item-%d", s, i))
		t.titles = append(t.titles, fmt.Sprintf("%s item %d | Shop", s, i))
	}
	t.paths[0], t.titles[0] = "/", "Shop: home"
	t.zipf = rand.NewZipf(t.r, 1.2, 2, uint64(len(t.paths)-1))
	return t
}

type genEvent struct {
	batch records.Event
	edge  records.Edge
}

// batches returns the batches for about n events, sorted by time, and the
// number of pageviews among them.
func (t *traffic) batches(n int) ([]*records.Batch, int) {
	type pending struct {
		at int64
		b  *records.Batch
	}
	var out []pending
	events, pageviews := 0, 0
	devices := []records.Edge{
		{Country: "DE", Region: "DE-BE", Device: "desktop", Browser: "Firefox", OS: "Linux"},
		{Country: "DE", Region: "DE-BY", Device: "mobile", Browser: "Safari", OS: "iOS"},
		{Country: "FR", Region: "FR-IDF", Device: "desktop", Browser: "Chrome", OS: "Windows"},
		{Country: "US", Region: "US-CA", Device: "mobile", Browser: "Chrome", OS: "Android"},
		{Country: "GB", Region: "GB-ENG", Device: "tablet", Browser: "Safari", OS: "iOS"},
	}
	refs := []records.URL{
		{Scheme: "https", Host: "www.google.com", Path: "/"},
		{Scheme: "https", Host: "www.google.de", Path: "/"},
		{Scheme: "https", Host: "duckduckgo.com", Path: "/"},
		{Scheme: "https", Host: "l.facebook.com", Path: "/"},
		{Scheme: "https", Host: "t.co", Path: "/x"},
		{Scheme: "https", Host: "news.example.org", Path: "/story"},
		{Scheme: "https", Host: "chatgpt.com", Path: "/"},
	}
	span := int64(t.days) * 86_400_000
	browser := 0
	// Random version-4 ids, as browsers make them.
	nextID := func() records.UUID {
		var u records.UUID
		x, y := t.r.Uint64(), t.r.Uint64()
		for i := range 8 {
			u[i] = byte(x >> (8 * i))
			u[8+i] = byte(y >> (8 * i))
		}
		u[6] = u[6]&0x0f | 0x40
		u[8] = u[8]&0x3f | 0x80
		return u
	}
	for events < n {
		browser++
		anon := fmt.Sprintf("%016x", t.r.Uint64())
		user := ""
		if t.r.IntN(10) == 0 {
			user = fmt.Sprintf("user-%d", browser)
		}
		edge := devices[t.r.IntN(len(devices))]
		at := t.start.UnixMilli() + t.r.Int64N(span)
		visits := 1 + int(math.Floor(t.r.ExpFloat64()*0.6))
		for range visits {
			session := nextID()
			views := 1 + int(math.Floor(t.r.ExpFloat64()*3))
			land := t.r.IntN(10)
			var ref records.URL
			query := ""
			switch {
			case land < 4:
				ref = refs[t.r.IntN(3)]
			case land < 5:
				ref = refs[3+t.r.IntN(2)]
			case land < 6:
				ref = refs[5+t.r.IntN(2)]
			case land < 7:
				query = "utm_source=newsletter&utm_medium=email&utm_campaign=autumn"
			case land < 8:
				query = "gclid=Cj0KCQ" + fmt.Sprintf("%x", t.r.Uint32())
				ref = refs[0]
			}
			var batch []records.Event
			flush := func() {
				if len(batch) == 0 {
					return
				}
				b := &records.Batch{Project: t.project, Source: "0195f3b4-0000-7000-8000-0000000000a1",
					SourceKind: records.SourceWebsite, Mode: records.ModeFull, ID: nextID(),
					ReceivedAt: batch[len(batch)-1].Time + 500, SentAt: -1, Edge: edge,
					Context: records.Context{SDK: "mf-js/1.0.0", Locale: "de-DE", Timezone: "Europe/Berlin"}}
				b.Receipt = records.Receipt{Batch: b.ID.String(), Accepted: len(batch)}
				b.Events = batch
				out = append(out, pending{at: b.ReceivedAt, b: b})
				batch = nil
			}
			for v := range views {
				i := int(t.zipf.Uint64())
				ev := records.Event{ID: nextID(), Name: "$pageview", Time: at,
					Page:        records.Page{URL: records.URL{Scheme: "https", Host: "shop.example", Path: t.paths[i]}, Title: t.titles[i]},
					AnonymousID: anon, SessionID: session}
				if v == 0 {
					ev.Page.URL.Query = query
					ev.Page.Referrer = ref
				} else {
					ev.Page.Referrer = records.URL{Scheme: "https", Host: "shop.example", Path: t.paths[t.r.IntN(len(t.paths))]}
				}
				if user != "" && v > 0 {
					ev.UserID = user
				}
				batch = append(batch, ev)
				events++
				pageviews++
				if t.r.IntN(40) == 0 {
					at += 1000
					batch = append(batch, records.Event{ID: nextID(), Name: "order_completed", Time: at,
						Page:        records.Page{URL: records.URL{Scheme: "https", Host: "shop.example", Path: "/checkout/done"}},
						AnonymousID: anon, UserID: user, SessionID: session,
						Properties: []byte(`{"total":49.9,"items":2}`), Revenue: "49.9", Currency: "EUR"})
					events++
				}
				// Browser SDKs send every few events.
				if !t.perVisit && t.r.IntN(3) == 0 {
					flush()
				}
				at += 20_000 + t.r.Int64N(150_000)
			}
			flush()
			at += 2*3_600_000 + t.r.Int64N(span)
			if at > t.start.UnixMilli()+span {
				break
			}
		}
	}
	// The log holds batches in the order they were received.
	slices := out
	sortPending(slices, func(a, b pending) bool { return a.at < b.at })
	bs := make([]*records.Batch, len(slices))
	for i, p := range slices {
		bs[i] = p.b
	}
	return bs, pageviews
}

// cpuTime returns the CPU time the process used so far (user and system).
func cpuTime() time.Duration {
	user, sys := cpuTimes()
	return user + sys
}

// cpuTimes returns the process's CPU time in user and in kernel mode
// (page faults of fresh memory, writes, futexes).
func cpuTimes() (user, sys time.Duration) {
	ru := rusage()
	return time.Duration(ru.Utime.Nano()), time.Duration(ru.Stime.Nano())
}

func rusage() syscall.Rusage {
	var ru syscall.Rusage
	_ = syscall.Getrusage(syscall.RUSAGE_SELF, &ru)
	return ru
}

func sortPending[T any](s []T, less func(a, b T) bool) {
	// Insertion into a merge sort of the standard library would need
	// another import; use a simple bottom-up merge sort.
	tmp := make([]T, len(s))
	for w := 1; w < len(s); w *= 2 {
		for lo := 0; lo < len(s); lo += 2 * w {
			mid, hi := min(lo+w, len(s)), min(lo+2*w, len(s))
			i, j, k := lo, mid, lo
			for i < mid && j < hi {
				if less(s[j], s[i]) {
					tmp[k] = s[j]
					j++
				} else {
					tmp[k] = s[i]
					i++
				}
				k++
			}
			k += copy(tmp[k:], s[i:mid])
			copy(tmp[k:], s[j:hi])
		}
		copy(s, tmp)
	}
}

// BenchmarkEngine measures the pure fact engine: batches in, facts out
// (one Flush per 100,000 events, as commits take them from a backlog).
func BenchmarkEngine(b *testing.B) {
	c := benchCase(b)
	tr := newTraffic(c.project.ID, 1)
	bs, _ := tr.batches(200_000)
	n := 0
	for _, x := range bs {
		n += len(x.Events)
	}
	b.ReportAllocs()
	b.ResetTimer()
	for b.Loop() {
		e := c.engine(b)
		since := 0
		for _, x := range bs {
			since += e.AddBatch(x)
			if since >= 100_000 {
				e.Flush()
				since = 0
			}
		}
		e.Flush()
	}
	b.ReportMetric(float64(n)*float64(b.N)/b.Elapsed().Seconds(), "events/s")
}

// BenchmarkEngineMemory reports the heap an engine keeps per event once
// 200,000 events of typical traffic are added and flushed (HeapInuse after
// a full GC, less the heap before: the memory the late window costs), and
// the part of it the GC must scan for pointers at every cycle
// (runtime/metrics /gc/scan/heap:bytes), per event.
func BenchmarkEngineMemory(b *testing.B) {
	c := benchCase(b)
	tr := newTraffic(c.project.ID, 1)
	bs, _ := tr.batches(200_000)
	n := 0
	for _, x := range bs {
		n += len(x.Events)
	}
	b.ReportAllocs()
	var inuse, live, scan float64
	scanned := func() int64 {
		s := []metrics.Sample{{Name: "/gc/scan/heap:bytes"}}
		metrics.Read(s)
		return int64(s[0].Value.Uint64())
	}
	for b.Loop() {
		var before, after runtime.MemStats
		runtime.GC()
		runtime.ReadMemStats(&before)
		scan0 := scanned()
		e := c.engine(b)
		for _, x := range bs {
			e.AddBatch(x)
		}
		e.Flush()
		runtime.GC()
		runtime.ReadMemStats(&after)
		inuse = float64(int64(after.HeapInuse)-int64(before.HeapInuse)) / float64(n)
		live = float64(int64(after.HeapAlloc)-int64(before.HeapAlloc)) / float64(n)
		scan = float64(scanned()-scan0) / float64(n)
		runtime.KeepAlive(e)
	}
	b.ReportMetric(inuse, "heap-B/event")
	b.ReportMetric(live, "live-B/event")
	b.ReportMetric(scan, "scan-B/event")
	b.ReportMetric(float64(n)*float64(b.N)/b.Elapsed().Seconds(), "events/s")
}

// benchCase is the goals golden case's project (actions and segments).
func benchCase(b testing.TB) *goldenCase {
	for _, c := range loadGoldenCases(b) {
		if c.name == "goals" {
			return c
		}
	}
	b.Fatal("no goals case")
	return nil
}

// BenchmarkProcess measures the processor from a backlog: a million
// events of typical traffic wait in the embedded log; the processor
// consumes them, derives the facts and commits the tables to a local
// store. It reports events per second and the bytes stored per pageview
// (all tables: events archive, visits, conversions, people, identities,
// members). Run it with:
//
//	go test ./processor -run '^$' -bench BenchmarkProcess -benchtime 1x
func BenchmarkProcess(b *testing.B) {
	for _, mode := range []struct {
		name     string
		perVisit bool
		bulk     int
	}{{"browser-batches", false, 0}, {"visit-batches", true, 0}, {"bulk-batches", true, 100}} {
		b.Run(mode.name, func(b *testing.B) { benchProcess(b, mode.perVisit, mode.bulk) })
	}
}

// bulkBatches merges consecutive batches into batches of about n events
// (a server source relaying events in bulk), keeping each event's own
// fields; the merged batch has the edge of its first part.
func bulkBatches(bs []*records.Batch, n int) []*records.Batch {
	var out []*records.Batch
	var cur *records.Batch
	for _, b := range bs {
		if cur == nil || len(cur.Events)+len(b.Events) > n {
			c := *b
			c.Events = append([]records.Event(nil), b.Events...)
			cur = &c
			out = append(out, cur)
			continue
		}
		cur.Events = append(cur.Events, b.Events...)
		cur.ReceivedAt = b.ReceivedAt
		cur.Receipt.Accepted = len(cur.Events)
	}
	return out
}

func benchProcess(b *testing.B, perVisit bool, bulk int) {
	c := benchCase(b)
	events := 1_000_000
	if testing.Short() {
		events = 100_000
	}
	for b.Loop() {
		b.StopTimer()
		e := newEnv(b, "")
		e.provision(c)
		tr := newTraffic(c.project.ID, 2)
		tr.perVisit = perVisit
		bs, pageviews := tr.batches(events)
		if bulk > 0 {
			bs = bulkBatches(bs, bulk)
		}
		n := 0
		for _, x := range bs {
			n += len(x.Events)
		}
		seqs := e.publish(bs...)
		batches := len(bs)
		bs = nil
		// Give the memory of generating and publishing the input back to
		// the system, as a fresh process would not have it: the heap the
		// processor grows is faulted in during the run every time, not
		// sometimes (how much the background scavenger had returned made
		// page faults vary from 300,000 to 800,000 between runs).
		debug.FreeOSMemory()
		b.SetBytes(0)
		b.StartTimer()
		stopProfile := profileCPU(b)
		start := time.Now()
		cpu0 := cpuTime()
		_, sys0 := cpuTimes()
		faults0 := rusage().Minflt
		var ms0, ms1 runtime.MemStats
		runtime.ReadMemStats(&ms0)
		b.SetBytes(0)
		r := e.start(func(cfg *Config) {
			cfg.FlushInterval = 500 * time.Millisecond
			cfg.BacklogFlushInterval = 5 * time.Second
		}, nil)
		// When was the last batch handled (the log read and applied), as
		// against committed?
		handledIn := make(chan time.Duration, 1)
		stopWatch := make(chan struct{})
		go func() {
			t := time.NewTicker(10 * time.Millisecond)
			defer t.Stop()
			for {
				select {
				case <-stopWatch:
					handledIn <- 0
					return
				case <-t.C:
					if r.p.Stats().LastSeq >= seqs[len(seqs)-1] {
						handledIn <- time.Since(start)
						return
					}
				}
			}
		}()
		m := e.waitCheckpointWhile(c.project.ID, seqs[len(seqs)-1], func() uint64 { return r.p.Stats().LastSeq })
		took := time.Since(start)
		close(stopWatch)
		handled := <-handledIn
		cpu := cpuTime() - cpu0
		_, sys1 := cpuTimes()
		faults := rusage().Minflt - faults0
		runtime.ReadMemStats(&ms1)
		stopProfile()
		b.StopTimer()
		st := r.p.Stats()
		r.stop(b)
		stored, perTable := storedBytes(m)
		// What the tables settle to once the processor's compaction has
		// merged the files of the backlog's commits (a partition quiet for
		// CompactQuietAfter merges whole; here at once).
		scfg := rollups.DefaultConfig()
		scfg.CompactQuietAfter = time.Nanosecond
		cst, err := rollups.NewStore(e.bucket, scfg, nil)
		if err != nil {
			b.Fatal(err)
		}
		if _, err := cst.Compact(context.Background(), rollups.Live(c.project.ID)); err != nil {
			b.Fatal(err)
		}
		cm, err := cst.Load(context.Background(), rollups.Live(c.project.ID))
		if err != nil {
			b.Fatal(err)
		}
		compacted, _ := storedBytes(cm)
		b.ReportMetric(float64(n)/took.Seconds(), "events/s")
		b.ReportMetric(float64(n)/cpu.Seconds(), "events/cpu-s")
		b.ReportMetric(float64(batches)/took.Seconds(), "batches/s")
		b.ReportMetric(float64(ms1.TotalAlloc-ms0.TotalAlloc)/float64(n), "alloc-B/event")
		b.ReportMetric(float64(ms1.Sys)/(1<<20), "sys-MiB")
		b.ReportMetric(float64(perTable[TableEvents])/float64(pageviews), "archive-B/pageview")
		b.ReportMetric(float64(stored)/float64(pageviews), "total-B/pageview")
		b.ReportMetric(float64(compacted)/float64(pageviews), "compacted-B/pageview")

		b.Logf("last batch handled after %v, committed after %v", handled.Round(time.Millisecond), took.Round(time.Millisecond))
		b.Logf("cpu %v (%.1f µs per event, all goroutines of the process: processor, embedded NATS, GC), %v of it in the kernel; %d page faults", cpu.Round(time.Millisecond), float64(cpu.Microseconds())/float64(n), (sys1 - sys0).Round(time.Millisecond), faults)
		b.Logf("%d events (%d pageviews) in %d batches, %v: %.0f events/s; stored %d bytes (%.1f per pageview) %v; written %d bytes in %d commits",
			n, pageviews, batches, took.Round(time.Millisecond), float64(n)/took.Seconds(), stored,
			float64(stored)/float64(pageviews), perTable, st.BytesWritten, st.Commits)
		b.StartTimer()
	}
}

// profileCPU writes a CPU profile of the processing alone (not of the
// input's generation and publication) to the file MF_BENCH_CPUPROFILE
// names, when it is set, and allocation profiles before and after it to
// MF_BENCH_HEAPPROFILE.before and .after (compare them with pprof -base);
// it returns the function that stops it.
func profileCPU(b *testing.B) func() {
	heap := os.Getenv("MF_BENCH_HEAPPROFILE")
	writeHeap := func(suffix string) {
		if heap == "" {
			return
		}
		f, err := os.Create(heap + suffix)
		if err != nil {
			b.Fatal(err)
		}
		defer f.Close()
		if err := pprof.Lookup("allocs").WriteTo(f, 0); err != nil {
			b.Fatal(err)
		}
	}
	writeHeap(".before")
	path := os.Getenv("MF_BENCH_CPUPROFILE")
	if path == "" {
		return func() { writeHeap(".after") }
	}
	f, err := os.Create(path)
	if err != nil {
		b.Fatal(err)
	}
	if err := pprof.StartCPUProfile(f); err != nil {
		b.Fatal(err)
	}
	return func() {
		pprof.StopCPUProfile()
		if err := f.Close(); err != nil {
			b.Fatal(err)
		}
		writeHeap(".after")
	}
}

// BenchmarkFreshness measures how long an accepted batch takes to become
// visible to a reporting reader while the processor keeps up: batches are
// published every 20 ms (with the default commit interval of 500 ms) and
// a rollups Reader polls the project's manifest; it reports the p50 and
// p99 latency from the log's acknowledgement to the first snapshot whose
// checkpoint holds the batch.
//
//	go test ./processor -run '^$' -bench BenchmarkFreshness -benchtime 1x
func BenchmarkFreshness(b *testing.B) {
	c := benchCase(b)
	for b.Loop() {
		e := newEnv(b, "")
		e.provision(c)
		tr := newTraffic(c.project.ID, 3)
		bs, _ := tr.batches(4000)
		r := e.start(func(cfg *Config) { *cfg = DefaultConfig() }, nil)
		measureFreshness(b, e, c.project.ID, bs[:min(len(bs), 100)])
		r.stop(b)
	}
}

// BenchmarkFreshnessAtScale is BenchmarkFreshness for a project that
// already holds a million events (100,000 with -short; three days of a
// site's traffic: about 230,000 people, 280,000 visits): the processor
// first takes the backlog, then batches of new browsers arrive one at a
// time at the head of the log, on the backlog's last day, alone (quiet) or
// among 100 other batches a second (busy, about 200 events/s). A commit
// there adds the rows its batches changed; it used to rewrite every
// people bucket and visit day they touched, a cost that grew with the
// project, not with the batches.
func BenchmarkFreshnessAtScale(b *testing.B) {
	for _, load := range []struct {
		name string
		rate int // background batches per second
	}{{"quiet", 0}, {"busy", 100}} {
		b.Run(load.name, func(b *testing.B) { benchFreshnessAtScale(b, load.rate) })
	}
}

func benchFreshnessAtScale(b *testing.B, rate int) {
	c := benchCase(b)
	events := 1_000_000
	if testing.Short() {
		events = 100_000
	}
	for b.Loop() {
		e := newEnv(b, "")
		e.provision(c)
		backlog, _ := newTraffic(c.project.ID, 2).batches(events)
		seqs := e.publish(bulkBatches(backlog, 100)...)
		backlog = nil
		// New traffic falls on the backlog's last day, as traffic at the
		// head of the log falls on today.
		today := func(seed uint64) *traffic {
			tr := newTraffic(c.project.ID, seed)
			tr.start, tr.days = tr.start.AddDate(0, 0, tr.days-1), 1
			return tr
		}
		head, _ := today(3).batches(4000)
		background, _ := today(4).batches(200_000)
		r := e.start(func(cfg *Config) { *cfg = DefaultConfig() }, nil)
		start := time.Now()
		e.waitCheckpointWhile(c.project.ID, seqs[len(seqs)-1], func() uint64 { return r.p.Stats().LastSeq })
		b.Logf("backlog of %d events committed after %v", events, time.Since(start).Round(time.Millisecond))
		st0 := r.p.Stats()
		stop := e.publishEvery(background, rate)
		measureFreshness(b, e, c.project.ID, head[:min(len(head), 100)])
		sent, err := stop()
		if err != nil {
			b.Fatal(err)
		}
		st := r.p.Stats()
		b.Logf("%d background batches; at the head: %d commits, %d bytes written", sent, st.Commits-st0.Commits, st.BytesWritten-st0.BytesWritten)
		r.stop(b)
	}
}

// publishEvery publishes the batches in the background, perSecond of
// them a second (none for 0), until the returned function is called; that
// returns how many were published and the first error.
func (e *env) publishEvery(bs []*records.Batch, perSecond int) func() (int, error) {
	if perSecond <= 0 {
		return func() (int, error) { return 0, nil }
	}
	pub := e.log.Publisher()
	quit := make(chan struct{})
	type result struct {
		n   int
		err error
	}
	done := make(chan result, 1)
	go func() {
		t := time.NewTicker(time.Second / time.Duration(perSecond))
		defer t.Stop()
		n := 0
		for _, x := range bs {
			select {
			case <-quit:
				done <- result{n, nil}
				return
			case <-t.C:
			}
			msg, err := eventlog.NewBatchMessage(x)
			if err == nil {
				_, err = pub.PublishOnce(context.Background(), eventlog.TopicBatches, eventlog.BatchDedupeID(x.Project, x.ID), msg)
			}
			if err != nil {
				done <- result{n, fmt.Errorf("background batch %d: %w", n, err)}
				return
			}
			n++
		}
		done <- result{n, errors.New("background traffic ran out of batches")}
	}()
	return func() (int, error) {
		close(quit)
		r := <-done
		return r.n, r.err
	}
}

// measureFreshness publishes the batches one at a time and waits for each
// to be committed (the checkpoint reaching it, read through a rollups
// reader as the reporting API reads), 20 ms apart; it reports the p50 and
// p99 of those latencies.
func measureFreshness(b *testing.B, e *env, project string, bs []*records.Batch) {
	rd, err := rollups.NewReader(e.bucket, rollups.DefaultReaderConfig(), nil)
	if err != nil {
		b.Fatal(err)
	}
	var lat []time.Duration
	for i, x := range bs {
		seqs := e.publish(x)
		sent := time.Now()
		for {
			sn, err := rd.Snapshot(context.Background(), project)
			if err != nil {
				b.Fatal(err)
			}
			cp, _ := parseCheckpoint(sn.Manifest().Checkpoint("processor"))
			if cp.Seq >= seqs[0] {
				lat = append(lat, time.Since(sent))
				break
			}
			if time.Since(sent) > time.Minute {
				b.Fatalf("batch %d not visible after a minute", i)
			}
			time.Sleep(5 * time.Millisecond)
		}
		time.Sleep(20 * time.Millisecond)
	}
	sortPending(lat, func(a, b time.Duration) bool { return a < b })
	p50, p99 := lat[len(lat)/2], lat[len(lat)*99/100]
	b.ReportMetric(float64(p50.Milliseconds()), "p50-ms")
	b.ReportMetric(float64(p99.Milliseconds()), "p99-ms")
	b.Logf("%d batches: p50 %v, p99 %v, max %v", len(lat), p50, p99, lat[len(lat)-1])
}

// BenchmarkEncode times what a commit does with the changes of one Flush
// of 200,000 events of typical traffic (everything new: every visit and
// person is written): building each table's Arrow records and writing
// them as Parquet files to a local object store, per table. It reports
// µs per event of the input and the bytes written.
//
//	go test ./processor -run '^$' -bench BenchmarkEncode -benchtime 5x
func BenchmarkEncode(b *testing.B) {
	c := benchCase(b)
	tr := newTraffic(c.project.ID, 1)
	bs, _ := tr.batches(200_000)
	n := 0
	e := c.engine(b)
	for _, x := range bs {
		n += len(x.Events)
		e.AddBatch(x)
	}
	ch := e.Flush()
	bk := apptest.OpenBucket(b, b.TempDir())
	st, err := rollups.NewStore(bk, rollups.DefaultConfig(), nil)
	if err != nil {
		b.Fatal(err)
	}
	parts := recordsOf(st.Allocator(), ch, nil, "EUR", 1)
	tables := Tables()
	for _, name := range []string{TableEvents, TableVisits, TableConversions, TablePeople, TableIdentities, TableMembers} {
		b.Run(name, func(b *testing.B) {
			var written int64
			b.ReportAllocs()
			for b.Loop() {
				written = 0
				for _, p := range parts {
					if p.table != name || p.build == nil {
						continue
					}
					rec := p.build()
					f, err := st.Write(context.Background(), c.project.ID, tables[name], p.partition, rec)
					rec.Release()
					if err != nil {
						b.Fatal(err)
					}
					written += f.Bytes
				}
			}
			b.ReportMetric(float64(b.Elapsed().Microseconds())/float64(b.N)/float64(n), "µs/event")
			b.ReportMetric(float64(written)/float64(n), "B/event")
		})
	}
}

// storedBytes sums the sizes of a manifest's live data files, in all and
// per table.
func storedBytes(m *rollups.Manifest) (int64, map[string]int64) {
	var all int64
	per := map[string]int64{}
	for name, ts := range m.Tables {
		for _, files := range ts.Partitions {
			for _, f := range files {
				all += f.Bytes
				per[name] += f.Bytes
			}
		}
	}
	return all, per
}
