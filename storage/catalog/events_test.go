package catalog

import (
	"encoding/json"
	"fmt"
	"log/slog"
	"os"
	"strings"
	"testing"
)

// dump writes every entity of a state in a stable order, for comparisons.
func dump(t testing.TB, st *State) string {
	t.Helper()
	var b strings.Builder
	m := st.m
	write := func(kind string, v any) {
		data, err := encodeValue(v)
		if err != nil {
			t.Fatalf("cannot encode %s: %v", kind, err)
		}
		fmt.Fprintf(&b, "%s %s\n", kind, data)
	}
	for _, k := range sortedKeys(m.orgs) {
		write("organization", m.orgs[k])
	}
	for _, k := range sortedKeys(m.users) {
		write("user", m.users[k])
	}
	for _, k := range sortedKeys(m.apiKeys) {
		write("apikey", m.apiKeys[k])
	}
	for _, k := range sortedKeys(m.projects) {
		write("project", m.projects[k])
		pf := st.CompiledFlags(k)
		fmt.Fprintf(&b, "browser %s\nserver %s\n", pf.AppendDocument(nil, ViewBrowser, 0), pf.AppendDocument(nil, ViewServer, 0))
	}
	for _, k := range sortedKeys(m.sources) {
		write("source", m.sources[k])
	}
	for _, k := range sortedKeys(m.actions) {
		write("action", m.actions[k])
	}
	for _, k := range sortedKeys(m.funnels) {
		write("funnel", m.funnels[k])
	}
	for _, k := range sortedKeys(m.segments) {
		write("segment", m.segments[k])
	}
	for _, p := range sortedKeys(m.flags) {
		for _, k := range sortedKeys(m.flags[p]) {
			write("flag", m.flags[p][k])
		}
	}
	for _, p := range sortedKeys(m.providers) {
		for _, k := range sortedKeys(m.providers[p]) {
			write("provider", m.providers[p][k])
		}
	}
	for _, k := range sortedKeys(m.exposed) {
		fmt.Fprintf(&b, "exposed %s\n", k)
	}
	return b.String()
}

// testLogger writes log lines to the test output when MF_TEST_LOG=1 and
// discards them otherwise.
func testLogger(t testing.TB) *slog.Logger {
	if os.Getenv("MF_TEST_LOG") == "1" {
		return slog.New(slog.NewTextHandler(testWriter{t}, &slog.HandlerOptions{Level: slog.LevelDebug}))
	}
	return slog.New(slog.DiscardHandler)
}

type testWriter struct{ t testing.TB }

func (w testWriter) Write(p []byte) (int, error) {
	w.t.Log(strings.TrimSpace(string(p)))
	return len(p), nil
}

// records encodes a plan as a transaction.
func records(t testing.TB, p *Plan, maxBytes int) [][]byte {
	t.Helper()
	base := p.base
	recs, err := encodeRecords(newUUID(), &base, p.changes, maxBytes)
	if err != nil {
		t.Fatal(err)
	}
	return recs
}

// Folding the records of a plan gives the state the plan predicted, also
// when the transaction is split into many records.
func TestFoldRoundTrip(t *testing.T) {
	for _, name := range validFiles(t) {
		for _, maxBytes := range []int{1 << 20, 1024} {
			t.Run(fmt.Sprintf("%s/%d", name, maxBytes), func(t *testing.T) {
				_, plan, err := planLocal(emptyState(), readTestdata(t, name))
				if err != nil {
					t.Fatal(err)
				}
				recs := records(t, plan, maxBytes)
				if maxBytes == 1024 && plan.Len() > 10 && len(recs) < 2 {
					t.Fatalf("%d changes in one record of at most %d bytes", plan.Len(), maxBytes)
				}
				fd := newFolder(newModel(), testLogger(t))
				for i, r := range recs {
					_, out, done := fd.fold(uint64(i+1), r)
					if done != (i == len(recs)-1) {
						t.Fatalf("record %d of %d: done %v", i+1, len(recs), done)
					}
					if done && !out.applied {
						t.Fatalf("transaction not applied")
					}
				}
				got := newState(fd.m, nil)
				if want := dump(t, plan.State()); dump(t, got) != want {
					t.Errorf("folded state differs from the plan:\ngot\n%s\nwant\n%s", dump(t, got), want)
				}
				if got.Version() != uint64(len(recs)) {
					t.Errorf("version %d, want %d", got.Version(), len(recs))
				}
			})
		}
	}
}

// Two applies planned on the same catalog: the first to reach the log wins,
// the second is dropped by every process alike.
func TestFoldConflict(t *testing.T) {
	st := emptyState()
	_, a, err := planLocal(st, readTestdata(t, "valid/minimal.json"))
	if err != nil {
		t.Fatal(err)
	}
	_, b, err := planLocal(st, readTestdata(t, "valid/full.json"))
	if err != nil {
		t.Fatal(err)
	}
	fd := newFolder(newModel(), testLogger(t))
	ra, rb := records(t, a, 1<<20), records(t, b, 1<<20)
	if _, out, done := fd.fold(1, ra[0]); !done || !out.applied {
		t.Fatalf("first transaction: done %v applied %v", done, out.applied)
	}
	if _, out, done := fd.fold(2, rb[0]); !done || out.applied {
		t.Fatalf("second transaction: done %v applied %v, want dropped", done, out.applied)
	}
	if got, want := dump(t, newState(fd.m, nil)), dump(t, a.State()); got != want {
		t.Errorf("state is not the first transaction's:\n%s", got)
	}
	// Planned again on the newer catalog, it takes effect.
	_, b2, err := planLocal(newState(fd.m.clone(), nil), readTestdata(t, "valid/full.json"))
	if err != nil {
		t.Fatal(err)
	}
	if _, out, done := fd.fold(3, records(t, b2, 1<<20)[0]); !done || !out.applied {
		t.Fatalf("replanned transaction: done %v applied %v", done, out.applied)
	}
	if fd.m.version != 3 || fd.m.configVersion != 3 {
		t.Errorf("version %d config version %d, want 3 and 3", fd.m.version, fd.m.configVersion)
	}
}

// Parts of transactions from several processes interleave; each takes
// effect with its last part. A transaction whose last part never comes
// never takes effect. Redelivered and unreadable records change nothing.
func TestFoldInterleavedAndBroken(t *testing.T) {
	_, full, err := planLocal(emptyState(), readTestdata(t, "valid/full.json"))
	if err != nil {
		t.Fatal(err)
	}
	big := records(t, full, 2048)
	if len(big) < 3 {
		t.Fatalf("want several records, got %d", len(big))
	}
	src := "30000000-0000-4000-8000-000000000002"
	hash := full.State().m.sources[src].KeyHash
	exposed, err := encodeRecords(newUUID(), nil, []change{{typ: typeKeyExposed, value: &keyExposed{Source: src, KeyHash: hash}}}, 1<<20)
	if err != nil {
		t.Fatal(err)
	}
	_, minimal, err := planLocal(emptyState(), readTestdata(t, "valid/minimal.json"))
	if err != nil {
		t.Fatal(err)
	}
	incomplete := records(t, minimal, 1<<20)
	// Make the minimal transaction two parts long, and never send the
	// second.
	var rec record
	if err := json.Unmarshal(incomplete[0], &rec); err != nil {
		t.Fatal(err)
	}
	rec.Parts = 2
	half, _ := json.Marshal(rec)

	fd := newFolder(newModel(), testLogger(t))
	seq := uint64(0)
	fold := func(payload []byte) (bool, bool) {
		seq++
		_, out, done := fd.fold(seq, payload)
		return done, out.applied
	}
	fold(half)
	fold(big[0])
	if done, applied := fold(exposed[0]); !done || !applied {
		t.Fatalf("exposure: done %v applied %v", done, applied)
	}
	fold([]byte("not json"))
	fold([]byte(`{"v":2,"tx":"x","part":0,"parts":1,"changes":[]}`))
	for _, r := range big[1 : len(big)-1] {
		if done, _ := fold(r); done {
			t.Fatal("transaction done before its last part")
		}
	}
	// A redelivery of an earlier sequence is ignored.
	if _, _, done := fd.fold(2, big[0]); done {
		t.Fatal("redelivered record folded again")
	}
	if done, applied := fold(big[len(big)-1]); !done || !applied {
		t.Fatalf("last part: done %v applied %v", done, applied)
	}
	got := newState(fd.m, nil)
	if !got.SecretKeyExposed(src) {
		t.Error("exposure lost")
	}
	if _, ok := got.Organization("10000000-0000-4000-8000-000000000009"); ok {
		t.Error("incomplete transaction took effect")
	}
	if len(fd.pending) != 1 {
		t.Errorf("%d pending transactions, want the incomplete one", len(fd.pending))
	}
	want := dump(t, full.State()) + "exposed " + hash + "\n"
	if dump(t, got) != want {
		t.Errorf("state differs:\ngot\n%s\nwant\n%s", dump(t, got), want)
	}
}

// Events of a type this version does not know (from a newer mf) are skipped;
// the rest of their transaction takes effect.
func TestFoldUnknownEventType(t *testing.T) {
	_, plan, err := planLocal(emptyState(), readTestdata(t, "valid/minimal.json"))
	if err != nil {
		t.Fatal(err)
	}
	var rec record
	if err := json.Unmarshal(records(t, plan, 1<<20)[0], &rec); err != nil {
		t.Fatal(err)
	}
	rec.Changes = append([]recordChange{{Type: "widget.put", Data: json.RawMessage(`{"id":"w"}`)}}, rec.Changes...)
	payload, _ := json.Marshal(rec)
	fd := newFolder(newModel(), testLogger(t))
	if _, out, done := fd.fold(1, payload); !done || !out.applied {
		t.Fatalf("done %v applied %v", done, out.applied)
	}
	if got, want := dump(t, newState(fd.m, nil)), dump(t, plan.State()); got != want {
		t.Errorf("got\n%s\nwant\n%s", got, want)
	}
}
