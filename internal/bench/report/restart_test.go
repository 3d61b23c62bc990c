package main

import (
	"bytes"
	"context"
	"os"
	"path/filepath"
	"regexp"
	"strconv"
	"testing"
	"time"
)

// TestRestartMode builds a tiny dataset, then runs the bench with
// --restart on it twice, as a user does (run with flags): each run must
// publish one batch, see the real processor commit it, and print the time
// to that commit and the processor's rebuild of the project's state with
// the events it read: the build's commits wrote the state table, so each
// run restores it and reads back some of the events (the days that were
// in memory), never more than the dataset holds.
func TestRestartMode(t *testing.T) {
	c := loadDatasets(t)["restart"]
	ctx, cancel := context.WithTimeout(context.Background(), 4*time.Minute)
	defer cancel()
	dir := t.TempDir()

	// --restart never builds: a directory without a dataset is refused
	// and left as it was.
	missing := filepath.Join(dir, "none")
	var out, errb bytes.Buffer
	if code := run(ctx, []string{"--dir", missing, "--restart"}, &out, &errb); code != 1 {
		t.Fatalf("--restart on %s: exit %d, want 1; stderr %s", missing, code, errb.String())
	}
	if _, err := os.Stat(missing); !os.IsNotExist(err) {
		t.Fatalf("--restart made %s: %v", missing, err)
	}

	data := filepath.Join(dir, "data")
	e, err := openEnv(ctx, data, nil, 0)
	if err != nil {
		t.Fatal(err)
	}
	cfg := DefaultConfig()
	cfg.Seed, cfg.People, cfg.Events, cfg.Days = c.Seed, c.People, c.Events, c.Days
	ds, err := build(ctx, cfg, e, berlin(t), &bytes.Buffer{})
	if err == nil {
		err = writeDataset(data, ds)
	}
	if err == nil {
		err = e.purgeBatches(ctx, ds.LastSeq)
	}
	e.close()
	if err != nil {
		t.Fatal(err)
	}

	figure := regexp.MustCompile(`first commit covering log position (\d+): ([0-9.]+) s`)
	rebuilt := regexp.MustCompile(`rebuilt from its tables in ([0-9.]+) s .*: (\d+) events (folded|read back)`)
	prev := ds
	for i := range 2 {
		profile := filepath.Join(dir, "restart"+strconv.Itoa(i)+".pprof")
		out.Reset()
		errb.Reset()
		if code := run(ctx, []string{"--dir", data, "--restart", "--restart-cpuprofile", profile}, &out, &errb); code != 0 {
			t.Fatalf("run %d: exit %d; stdout:\n%s\nstderr:\n%s", i+1, code, out.String(), errb.String())
		}
		t.Logf("run %d:\n%s", i+1, out.String())
		m := figure.FindStringSubmatch(out.String())
		if m == nil {
			t.Fatalf("run %d prints no time to the first commit:\n%s", i+1, out.String())
		}
		seq, _ := strconv.ParseUint(m[1], 10, 64)
		secs, _ := strconv.ParseFloat(m[2], 64)
		if seq <= prev.LastSeq || secs <= 0 {
			t.Errorf("run %d: first commit covering %d after %v s; want a position after the dataset's last %d and a time", i+1, seq, secs, prev.LastSeq)
		}
		f := rebuilt.FindStringSubmatch(out.String())
		if f == nil {
			t.Fatalf("run %d prints no rebuild of the project's state:\n%s", i+1, out.String())
		}
		// The build's commits wrote the state table: a restart restores
		// it and reads back the days that were in memory, some of the
		// events (all of them when every day was).
		n, _ := strconv.Atoi(f[2])
		if f[3] != "read back" || n <= 0 || n > prev.Truth.Events {
			t.Errorf("run %d: the rebuild %s %d events; want some of the dataset's %d read back", i+1, f[3], n, prev.Truth.Events)
		}
		if st, err := os.Stat(profile); err != nil || st.Size() == 0 {
			t.Errorf("run %d: no CPU profile at %s: %v", i+1, profile, err)
		}

		// The batch is in the tables and in the dataset's description.
		now, ok, err := readDataset(data)
		if err != nil || !ok {
			t.Fatalf("run %d: dataset.json: %v, %v", i+1, ok, err)
		}
		if now.LastSeq != seq || now.Truth.Events != prev.Truth.Events+1 || now.Truth.Batches != prev.Truth.Batches+1 {
			t.Errorf("run %d: dataset.json says last batch %d, %d events, %d batches; want %d, %d, %d",
				i+1, now.LastSeq, now.Truth.Events, now.Truth.Batches, seq, prev.Truth.Events+1, prev.Truth.Batches+1)
		}
		e, err := openEnv(ctx, data, nil, 0)
		if err != nil {
			t.Fatal(err)
		}
		cp, err := e.checkpoint(ctx, benchProject)
		e.close()
		if err != nil {
			t.Fatal(err)
		}
		if cp < seq {
			t.Errorf("run %d: the tables cover the log to %d, not to the restart's batch %d", i+1, cp, seq)
		}
		prev = now
	}
}
