package api

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"os"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/mfhq/mf/ingest"
	"github.com/mfhq/mf/internal/apptest"
	"github.com/mfhq/mf/processor"
	"github.com/mfhq/mf/rollups"
	"github.com/mfhq/mf/storage"
	"github.com/mfhq/mf/storage/catalog"
	"github.com/mfhq/mf/storage/eventlog"
)

// reportEnv runs the whole data path in process, on real parts: the
// embedded log on t.TempDir(), the catalog applied from a provisioning
// file, a local-directory bucket, the real ingest handler (batches go in
// exactly as clients send them), the real processor writing the tables,
// and the reporting API reading them. Every part shares one clock that
// tests set (env.setNow).
//
//	env := newReportEnv(t, "testdata/report/provision.json")
//	env.send(t, websiteKey, `{"v":1,"batch":"…","mode":"full","events":[…]}`)
//	env.wait(t)
//	status, body := env.get(t, "/api/v1/projects/<id>/overview?period=7d")
type reportEnv struct {
	log    *eventlog.Log
	cat    *catalog.Catalog
	bucket storage.Bucket
	reader *rollups.Reader
	ingest *ingest.Server
	rep    *Reporting
	clock  atomic.Int64 // unix nanos

	mu sync.Mutex
	// sent is the log position of the last batch published per project.
	sent map[string]uint64
	// token is the API key get() sends (the first unrevoked key of the
	// provisioning file's first user, unless set).
	token string
}

// reportUA is the User-Agent of browser batches unless a test gives one:
// a desktop Chrome on Windows.
const reportUA = "Mozilla/5.0 (Windows NT 10.0; Win64; x64) AppleWebKit/537.36 (KHTML, like Gecko) Chrome/126.0.0.0 Safari/537.36"

func (e *reportEnv) now() time.Time { return time.Unix(0, e.clock.Load()).UTC() }

// setNow moves the shared clock (ingest receipt times, the reporting
// API's "now").
func (e *reportEnv) setNow(t time.Time) { e.clock.Store(t.UnixNano()) }

// newReportEnv starts every part with the provisioning file applied and
// the clock at testNow.
func newReportEnv(t testing.TB, provisioningFile string) *reportEnv {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	dir := t.TempDir()
	e := &reportEnv{sent: map[string]uint64{}}
	e.setNow(testNow)
	var flags *ingest.FlagDocuments
	st := apptest.Start(t, apptest.Options{Dir: dir, Catalog: func(s *apptest.Stack, cfg *catalog.Config) error {
		var err error
		flags, err = ingest.NewFlagDocuments(ctx, ingest.DefaultFlagDocumentsConfig(), s.Bucket, s.Logger)
		if err != nil {
			return fmt.Errorf("cannot start the flag documents: %w", err)
		}
		s.OnClose(func() error { return flags.Close(context.Background()) })
		cfg.CheckDocuments = flags.CheckDocuments
		return nil
	}})
	lg, b, cat, logger := st.Log, st.Bucket, st.Catalog, st.Logger
	e.log, e.bucket, e.cat = lg, b, cat
	file := st.Provision(t, provisioningFile)
	var prov struct {
		Users []struct {
			APIKeys []struct {
				Token   string `json:"token"`
				Revoked bool   `json:"revoked"`
			} `json:"apiKeys"`
		} `json:"users"`
	}
	if err := json.Unmarshal(file, &prov); err != nil {
		t.Fatalf("cannot read %s: %v", provisioningFile, err)
	}
	for _, u := range prov.Users {
		for _, k := range u.APIKeys {
			if !k.Revoked && e.token == "" {
				e.token = k.Token
			}
		}
	}

	rcfg := rollups.DefaultReaderConfig()
	rcfg.Freshness = 0 // every request sees the latest commit
	rd, err := rollups.NewReader(b, rcfg, logger)
	if err != nil {
		t.Fatal(err)
	}
	e.reader = rd
	store, err := rollups.NewStore(b, rollups.DefaultConfig(), logger)
	if err != nil {
		t.Fatal(err)
	}
	segs, err := processor.NewSegments(rd, processor.DefaultSegmentsConfig(), logger)
	if err != nil {
		t.Fatal(err)
	}
	pcfg := processor.DefaultConfig()
	pcfg.FlushInterval = 50 * time.Millisecond
	pcfg.BacklogFlushInterval = 200 * time.Millisecond
	psub, err := lg.Subscriber(eventlog.DefaultSubscriberConfig(""))
	if err != nil {
		t.Fatal(err)
	}
	proc, err := processor.New(pcfg, processor.Deps{Subscriber: psub, Log: lg, Store: store, Reader: rd, Bucket: b,
		Catalog: cat, Segments: segs, Logger: logger})
	if err != nil {
		t.Fatalf("cannot build the processor: %v", err)
	}
	pctx, pcancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- proc.Run(pctx) }()
	t.Cleanup(func() {
		pcancel()
		select {
		case err := <-done:
			// A test that ends before the processor finished starting
			// stops it mid-start: that is a clean stop.
			if err != nil && !errors.Is(err, context.Canceled) {
				t.Errorf("processor: %v", err)
			}
		case <-time.After(2 * time.Minute):
			t.Error("the processor did not stop within 2 minutes")
		}
		psub.Close()
	})

	icfg := ingest.DefaultConfig()
	icfg.Limits = icfg.Limits.Scaled(1e6)
	srv, err := ingest.NewServer(ctx, icfg, ingest.Deps{Catalog: cat, Log: lg.Publisher(), Bucket: b, Clock: e.now, Flags: flags}, logger)
	if err != nil {
		t.Fatalf("cannot start ingest: %v", err)
	}
	t.Cleanup(func() { srv.Close() })
	e.ingest = srv

	rep, err := NewReporting(ctx, DefaultReportingConfig(), ReportingDeps{Catalog: cat, Bucket: b, Clock: e.now, Reader: rd},
		func() bool { return true }, logger)
	if err != nil {
		t.Fatalf("cannot build the reporting API: %v", err)
	}
	t.Cleanup(func() { rep.Close() })
	e.rep = rep
	return e
}

// sendOpts are the request facts of a batch besides its body.
type sendOpts struct {
	// Addr is the client address (default 198.51.100.7); consentless
	// visitors are told apart by address and User-Agent.
	Addr string
	// UA is the User-Agent (default reportUA).
	UA string
}

// send posts a batch to the source with key (a website key goes in the
// path, a server key as bearer) through the real ingest handler, and
// fails the test unless it is accepted (202).
func (e *reportEnv) send(t testing.TB, key, body string) { e.sendWith(t, key, body, sendOpts{}) }

// sendWith is send with other request facts.
func (e *reportEnv) sendWith(t testing.TB, key, body string, o sendOpts) {
	t.Helper()
	if o.Addr == "" {
		o.Addr = "198.51.100.7"
	}
	if o.UA == "" {
		o.UA = reportUA
	}
	st := e.cat.State()
	var req *http.Request
	var project string
	if src, ok := st.SourceByKey(key); ok && src.Kind == catalog.KindWebsite {
		req = httptest.NewRequest(http.MethodPost, "/v1/batch/"+key, strings.NewReader(body))
		req.Header.Set("Content-Type", "text/plain;charset=UTF-8")
		project = src.Project
	} else {
		req = httptest.NewRequest(http.MethodPost, "/v1/batch", strings.NewReader(body))
		req.Header.Set("Content-Type", "application/json")
		req.Header.Set("Authorization", "Bearer "+key)
	}
	req.Header.Set("User-Agent", o.UA)
	if strings.Contains(o.Addr, ":") {
		req.RemoteAddr = "[" + o.Addr + "]:5000"
	} else {
		req.RemoteAddr = o.Addr + ":5000"
	}
	resp, err := e.ingest.App().Test(req, -1)
	if err != nil {
		t.Fatalf("POST %s: %v", req.URL.Path, err)
	}
	defer resp.Body.Close()
	out, _ := io.ReadAll(resp.Body)
	if resp.StatusCode != http.StatusAccepted {
		t.Fatalf("batch refused by ingest: %d %s\n%s", resp.StatusCode, out, body)
	}
	var receipt struct {
		Accepted int `json:"accepted"`
	}
	_ = json.Unmarshal(out, &receipt)
	if receipt.Accepted == 0 {
		t.Fatalf("ingest kept no event of the batch: %s\n%s", out, body)
	}
	if project == "" {
		project = e.projectOfLast(t)
	}
	seq, err := e.log.LastSeq(context.Background(), eventlog.TopicBatches)
	if err != nil {
		t.Fatal(err)
	}
	e.mu.Lock()
	e.sent[project] = max(e.sent[project], seq)
	e.mu.Unlock()
}

// projectOfLast reads the project of the last batch on the log (server
// keys are stored only as hashes, so the project is read back).
func (e *reportEnv) projectOfLast(t testing.TB) string {
	t.Helper()
	ctx := context.Background()
	seq, err := e.log.LastSeq(ctx, eventlog.TopicBatches)
	if err != nil {
		t.Fatal(err)
	}
	m, err := e.log.GetMsg(ctx, eventlog.TopicBatches, seq)
	if err != nil {
		t.Fatal(err)
	}
	return eventlog.BatchProject(m)
}

// wait blocks until the processor committed every batch sent so far.
func (e *reportEnv) wait(t testing.TB) {
	t.Helper()
	e.mu.Lock()
	want := map[string]uint64{}
	for p, s := range e.sent {
		want[p] = s
	}
	e.mu.Unlock()
	deadline := time.Now().Add(2 * time.Minute)
	for p, seq := range want {
		for {
			sn, err := e.reader.Refresh(context.Background(), p)
			if err != nil {
				t.Fatal(err)
			}
			var cp struct {
				Seq uint64 `json:"seq"`
			}
			if s := sn.Manifest().Checkpoint("processor"); s != "" {
				if err := json.Unmarshal([]byte(s), &cp); err != nil {
					t.Fatalf("cannot read the processor checkpoint %q: %v", s, err)
				}
			}
			if cp.Seq >= seq {
				break
			}
			if time.Now().After(deadline) {
				t.Fatalf("project %s: the processor committed up to %d, not %d, within 2 minutes", p, cp.Seq, seq)
			}
			time.Sleep(20 * time.Millisecond)
		}
	}
}

// get sends GET path to the reporting API with the env's API key.
func (e *reportEnv) get(t testing.TB, path string) (int, []byte) {
	t.Helper()
	return e.getAs(t, e.token, path)
}

// getAs sends GET path with another credential.
func (e *reportEnv) getAs(t testing.TB, token, path string) (int, []byte) {
	t.Helper()
	req := httptest.NewRequest(http.MethodGet, path, nil)
	req.RemoteAddr = "192.0.2.1:4000"
	if token != "" {
		req.Header.Set("Authorization", "Bearer "+token)
	}
	resp, err := e.rep.App().Test(req, -1)
	if err != nil {
		t.Fatalf("GET %s: %v", path, err)
	}
	defer resp.Body.Close()
	body, _ := io.ReadAll(resp.Body)
	return resp.StatusCode, body
}

// getJSON is get for a 200 answer, decoded.
func (e *reportEnv) getJSON(t testing.TB, path string) map[string]any {
	t.Helper()
	status, body := e.get(t, path)
	if status != http.StatusOK {
		t.Fatalf("GET %s: %d %s", path, status, body)
	}
	var doc map[string]any
	d := json.NewDecoder(bytes.NewReader(body))
	d.UseNumber()
	if err := d.Decode(&doc); err != nil {
		t.Fatalf("GET %s: not JSON: %v: %s", path, err, body)
	}
	return doc
}

// projectData loads the data layer's view of a project directly.
func (e *reportEnv) projectData(t testing.TB, projectID string) *projectData {
	t.Helper()
	p, ok := e.cat.State().Project(projectID)
	if !ok {
		t.Fatalf("no project %s in the catalog", projectID)
	}
	d, err := e.rep.data(context.Background(), p)
	if err != nil {
		t.Fatalf("cannot load the tables of %s: %v", projectID, err)
	}
	return d
}

// sendFile sends every batch of a JSON file: a list of {"comment",
// "key", "addr" (optional), "ua" (optional), "body"} objects, in order.
func (e *reportEnv) sendFile(t testing.TB, path string) {
	t.Helper()
	data, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	var list []struct {
		Key  string          `json:"key"`
		Addr string          `json:"addr"`
		UA   string          `json:"ua"`
		Body json.RawMessage `json:"body"`
	}
	if err := json.Unmarshal(data, &list); err != nil {
		t.Fatalf("cannot read %s: %v", path, err)
	}
	for _, b := range list {
		e.sendWith(t, b.Key, string(b.Body), sendOpts{Addr: b.Addr, UA: b.UA})
	}
}
