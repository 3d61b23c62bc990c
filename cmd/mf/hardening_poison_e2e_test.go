package main

import (
	"context"
	"encoding/json"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/ThreeDotsLabs/watermill/message"
	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/mfhq/mf/storage/eventlog"
	"github.com/mfhq/mf/storage/eventlog/natstest"
)

// The two projects of testdata/hardening/two-projects.json, in the same
// partition of the log (so one processor serves both), and their keys.
const (
	poisonedProject = "7a0b1c2d-3e4f-4a5b-8c6d-000000000a01"
	healthyProject  = "7a0b1c2d-3e4f-4a5b-8c6d-000000000b33"
	poisonedKey     = "mf_poison01_Server-Secret_1"
	healthyKey      = "mf_health02_Server-Secret_2"
	twoProjectsFile = "testdata/hardening/two-projects.json"
)

// peopleOf reads a project's people of the last 24 hours from the
// reporting API.
func peopleOf(t testing.TB, api, project string) float64 {
	t.Helper()
	code, _, b := do(t, "GET", api+"/api/v1/projects/"+project+"/overview?period=24h", nil, "Authorization", "Bearer "+demoPAT)
	if code != 200 {
		t.Fatalf("overview of %s: %d %s", project, code, b)
	}
	var doc struct {
		Data struct {
			Attributes struct {
				Numbers []struct {
					Key   string
					Value any
				}
			}
		}
	}
	if err := json.Unmarshal(b, &doc); err != nil {
		t.Fatal(err)
	}
	for _, n := range doc.Data.Attributes.Numbers {
		if n.Key == "people" {
			v, _ := n.Value.(float64)
			return v
		}
	}
	return -1
}

// poisonRun sends batches of one person each to the two projects and
// keeps count of what was answered 202.
type poisonRun struct {
	t    *testing.T
	p    *mfProc
	sent map[string]int
	n    int
}

func (r *poisonRun) send(project string, batches int) {
	r.t.Helper()
	key := map[string]string{poisonedProject: poisonedKey, healthyProject: healthyKey}[project]
	for range batches {
		r.n++
		body := batchBody(fmt.Sprintf("9015a000-0000-4000-8000-%012d", r.n), "full",
			fmt.Sprintf(`{"name":"$pageview","anonymousId":"poison-%d","page":{"url":"https://shop.example/"}}`, r.n))
		if code, _, resp := do(r.t, "POST", r.p.ingest+"/v1/batch", body,
			"Authorization", "Bearer "+key, "Content-Type", "application/json"); code != 202 {
			r.t.Fatalf("batch %d to %s: %d %s", r.n, project, code, resp)
		}
		r.sent[project]++
	}
}

// waitPeople waits until the project's people are what was sent to it.
func (r *poisonRun) waitPeople(project string, within time.Duration) {
	r.t.Helper()
	waitForEvery(r.t, within, 250*time.Millisecond, func() bool {
		got := peopleOf(r.t, r.p.api, project)
		if got > float64(r.sent[project]) {
			r.t.Fatalf("project %s counts %v people, more than the %d sent", project, got, r.sent[project])
		}
		return got == float64(r.sent[project])
	})
}

func (r *poisonRun) parked() float64 {
	return sample(r.t, scrape(r.t, r.p), "mf_processor_projects_parked")
}

// TestPoisonedProjectIsQuarantined runs mf serve on an external NATS
// server with two projects that one processor serves (same partition),
// and poisons one of them twice:
//
//   - an undecodable batch in the log under its project: the project is
//     parked (logged with its id, mf_processor_projects_parked 1) and its
//     later batches wait in the log, while the other project's counts keep
//     advancing, exactly; once the batch is removed from the log (as an
//     operator does with `nats stream rmm`) the project reads its batches
//     back and counts every one once;
//   - a corrupt manifest, found at a restart: the same, until the manifest
//     is put back;
//   - corrupt Parquet files of its events table, found at a restart: the
//     same, until they are put back.
func TestPoisonedProjectIsQuarantined(t *testing.T) {
	ns := natstest.StartServer(t, "nats", "")
	data := t.TempDir()
	p := startMF(t, data, "serve", "--provision", twoProjectsFile, "--log", ns.URL())
	r := &poisonRun{t: t, p: p, sent: map[string]int{}}
	r.send(poisonedProject, 2)
	r.send(healthyProject, 2)
	r.waitPeople(poisonedProject, 30*time.Second)
	r.waitPeople(healthyProject, 30*time.Second)

	// An undecodable batch of the poisoned project, stored by another
	// client of the log.
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	lcfg := eventlog.DefaultConfig()
	lcfg.URL = ns.URL()
	lg, err := eventlog.Open(ctx, lcfg, nil)
	if err != nil {
		t.Fatal(err)
	}
	defer lg.Close()
	bad := message.NewMessage("0b5e55ed-0000-4000-8000-000000000001", []byte("\x00 not a batch of any version"))
	bad.Metadata.Set(eventlog.MetaProject, poisonedProject)
	if err := lg.Publisher().Publish(eventlog.BatchSubject(poisonedProject), bad); err != nil {
		t.Fatal(err)
	}
	badSeq, err := lg.LastSeqKey(ctx, eventlog.TopicBatches, poisonedProject)
	if err != nil {
		t.Fatal(err)
	}
	r.send(poisonedProject, 3)
	r.send(healthyProject, 3)
	r.waitPeople(healthyProject, 30*time.Second)
	waitFor(t, 30*time.Second, func() bool { return r.parked() == 1 })
	if got := peopleOf(t, p.api, poisonedProject); got != 2 {
		t.Errorf("the poisoned project counts %v people, want the 2 before its undecodable batch", got)
	}
	if out := p.out.String(); !strings.Contains(out, "project="+poisonedProject) || !strings.Contains(out, "cannot be decoded") {
		t.Errorf("mf's output does not name the poisoned project and why; tail:\n%s", tail(out, 3000))
	}
	r.send(healthyProject, 2)
	r.waitPeople(healthyProject, 30*time.Second)

	// The operator removes the batch: the project goes on.
	nc, err := nats.Connect(ns.URL())
	if err != nil {
		t.Fatal(err)
	}
	defer nc.Close()
	js, _ := jetstream.New(nc)
	stream, err := js.Stream(ctx, "MF_BATCHES")
	if err != nil {
		t.Fatal(err)
	}
	if err := stream.DeleteMsg(ctx, badSeq); err != nil {
		t.Fatalf("cannot remove the undecodable batch %d: %v", badSeq, err)
	}
	r.waitPeople(poisonedProject, 90*time.Second)
	waitFor(t, 30*time.Second, func() bool { return r.parked() == 0 })
	if c := p.stop(time.Minute); c != 0 {
		t.Fatalf("mf serve: exit %d on SIGTERM", c)
	}

	// A corrupt manifest, found at the next start.
	var manifest string
	_ = filepath.WalkDir(data, func(path string, d fs.DirEntry, err error) error {
		if err == nil && strings.HasSuffix(filepath.ToSlash(path), "rollups/"+poisonedProject+"/manifest.json") {
			manifest = path
		}
		return nil
	})
	if manifest == "" {
		t.Fatalf("no manifest of project %s under %s", poisonedProject, data)
	}
	good, err := os.ReadFile(manifest)
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(manifest, []byte(`{"version": 7, "tables": [`), 0o644); err != nil {
		t.Fatal(err)
	}
	p = startMF(t, data, "serve", "--log", ns.URL())
	r.p = p
	r.send(poisonedProject, 2)
	r.send(healthyProject, 3)
	r.waitPeople(healthyProject, 30*time.Second)
	waitFor(t, 30*time.Second, func() bool { return r.parked() == 1 })
	if !strings.Contains(p.out.String(), "project="+poisonedProject) {
		t.Errorf("mf's output does not name the project whose manifest is corrupt; tail:\n%s", tail(p.out.String(), 3000))
	}
	if err := os.WriteFile(manifest, good, 0o644); err != nil {
		t.Fatal(err)
	}
	r.waitPeople(poisonedProject, 90*time.Second)
	r.waitPeople(healthyProject, 30*time.Second)
	waitFor(t, 30*time.Second, func() bool { return r.parked() == 0 })
	if c := p.stop(time.Minute); c != 0 {
		t.Fatalf("mf serve: exit %d on SIGTERM", c)
	}

	// Corrupt Parquet files of its events table, found at the next start.
	saved := map[string][]byte{}
	_ = filepath.WalkDir(data, func(path string, d fs.DirEntry, err error) error {
		if err == nil && strings.Contains(filepath.ToSlash(path), "rollups/"+poisonedProject+"/data/events/") && strings.HasSuffix(path, ".parquet") {
			b, rerr := os.ReadFile(path)
			if rerr != nil {
				t.Fatal(rerr)
			}
			saved[path] = b
		}
		return nil
	})
	if len(saved) == 0 {
		t.Fatalf("no events file of project %s under %s", poisonedProject, data)
	}
	for path, b := range saved {
		if err := os.WriteFile(path, []byte(strings.Repeat("\xff", len(b))), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	p = startMF(t, data, "serve", "--log", ns.URL())
	r.p = p
	r.send(poisonedProject, 2)
	r.send(healthyProject, 2)
	r.waitPeople(healthyProject, 30*time.Second)
	waitFor(t, 30*time.Second, func() bool { return r.parked() == 1 })
	for path, b := range saved {
		if err := os.WriteFile(path, b, 0o644); err != nil {
			t.Fatal(err)
		}
	}
	r.waitPeople(poisonedProject, 90*time.Second)
	r.waitPeople(healthyProject, 30*time.Second)
	waitFor(t, 30*time.Second, func() bool { return r.parked() == 0 })
	if c := p.stop(time.Minute); c != 0 {
		t.Errorf("mf serve: exit %d on SIGTERM", c)
	}
}
