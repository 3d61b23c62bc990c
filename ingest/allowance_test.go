package ingest

import (
	"bytes"
	"context"
	"fmt"
	"io"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/mfhq/mf/internal/apptest"
)

// TestAllowanceSharedByProcesses: two intake servers on one log and one
// store (two `mf ingest` processes) share an organization's allowance of
// 10 events: together they never accept more, each hands out what it took
// from the counter without writing it per batch, and once both have given
// back what they held (Close) the counter says exactly what was stored.
func TestAllowanceSharedByProcesses(t *testing.T) {
	env := newTestEnv(t, unlimited())
	env.clock.Store(time.Date(2026, 6, 10, 12, 0, 0, 0, time.UTC).UnixMilli())
	other, err := NewServer(context.Background(), unlimited(), Deps{Catalog: env.cat, Log: env.log.Publisher(), Bucket: env.bucket, Clock: env.now}, apptest.Logger())
	if err != nil {
		t.Fatal(err)
	}
	servers := []*Server{env.srv, other}
	send := func(srv *Server, n, id int) string {
		t.Helper()
		evs := strings.Repeat(`{"name":"e"},`, n)
		body := fmt.Sprintf(`{"v":1,"batch":"dddddddd-0000-4000-8000-%012d","mode":"full","events":[%s]}`, id, evs[:len(evs)-1])
		req := httptest.NewRequest("POST", "/v1/batch", bytes.NewReader([]byte(body)))
		req.Header.Set("Authorization", "Bearer mf_srvallw1_k")
		resp, err := srv.App().Test(req, -1)
		if err != nil {
			t.Fatal(err)
		}
		out, _ := io.ReadAll(resp.Body)
		return string(out)
	}
	steps := []struct {
		srv, n, id int
		want       string
	}{
		{0, 6, 1, `"accepted":6,"dropped":0}`},
		// A resend to the second process: the first receipt, and what the
		// second took for it stays in its hands.
		{1, 6, 1, `"accepted":6,"dropped":0}`},
		{1, 6, 2, `"accepted":3,"dropped":3}`}, // the first holds one of the 4 left
		{1, 1, 3, `"accepted":0,"dropped":1,"reason":"allowance_exhausted"}`},
		{0, 3, 4, `"accepted":1,"dropped":2}`}, // what it held
		{0, 1, 5, `"accepted":0,"dropped":1,"reason":"allowance_exhausted"}`},
	}
	for i, s := range steps {
		if out := send(servers[s.srv], s.n, s.id); !strings.HasSuffix(out, s.want) {
			t.Fatalf("step %d (process %d): %s, want …%s", i, s.srv, out, s.want)
		}
	}
	if err := other.Close(); err != nil {
		t.Fatal(err)
	}
	if err := env.srv.allowance.flush(context.Background()); err != nil {
		t.Fatal(err)
	}
	used, err := env.srv.allowance.used(context.Background(), orgOf(t, env, "mf_srvallw1_k"), "2026-06")
	if err != nil {
		t.Fatal(err)
	}
	if used != 10 {
		t.Fatalf("counter %d after both processes gave back what they held, want the 10 events stored", used)
	}
}

// TestAllowanceCrashBound: a process that dies holding part of an
// allowance leaves it counted (never stored), so the plan is never
// exceeded: another process gets only what the counter has left.
func TestAllowanceCrashBound(t *testing.T) {
	env := newTestEnv(t, unlimited())
	ctx := context.Background()
	dead := newAllowance(env.bucket, 1000)
	live := newAllowance(env.bucket, 1000)
	// 100 events, chunks of up to 1000: the first takes 5 and a quarter
	// of the rest, 23, then dies without giving back the 23 it holds.
	if got, err := dead.reserve(ctx, "org", "2026-07", 100, 5); err != nil || got != 5 {
		t.Fatalf("reserve: %d %v", got, err)
	}
	total := 5
	for {
		got, err := live.reserve(ctx, "org", "2026-07", 100, 7)
		if err != nil {
			t.Fatal(err)
		}
		if got == 0 {
			break
		}
		total += got
	}
	if total != 100-23 {
		t.Fatalf("%d events granted with 23 lost in a crash, want 77", total)
	}
	if err := live.flush(ctx); err != nil {
		t.Fatal(err)
	}
	if used, _ := live.used(ctx, "org", "2026-07"); used != 100 {
		t.Fatalf("counter %d, want 100 (77 granted, 23 lost with the crashed process)", used)
	}
}

func orgOf(t *testing.T, env *testEnv, key string) string {
	t.Helper()
	o, ok := lookupKey(env.cat.State(), key)
	if !ok {
		t.Fatalf("key %s not provisioned", key)
	}
	return o.org.ID
}
