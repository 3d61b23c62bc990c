package main

import (
	"fmt"
	"net"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/maxmind/mmdbwriter"
	"github.com/maxmind/mmdbwriter/mmdbtype"
)

// writeCountryDB writes a MaxMind-format country database that maps
// network to country, atomically (a rename over path), as geoipupdate
// replaces its files.
func writeCountryDB(t *testing.T, path, network, country string) {
	t.Helper()
	tree, err := mmdbwriter.New(mmdbwriter.Options{DatabaseType: "GeoLite2-Country", IPVersion: 6, RecordSize: 28,
		IncludeReservedNetworks: true})
	if err != nil {
		t.Fatal(err)
	}
	_, ipnet, err := net.ParseCIDR(network)
	if err != nil {
		t.Fatal(err)
	}
	rec := mmdbtype.Map{"country": mmdbtype.Map{"iso_code": mmdbtype.String(country)}}
	if err := tree.Insert(ipnet, rec); err != nil {
		t.Fatal(err)
	}
	tmp := path + ".tmp"
	f, err := os.Create(tmp)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := tree.WriteTo(f); err != nil {
		t.Fatal(err)
	}
	if err := f.Close(); err != nil {
		t.Fatal(err)
	}
	if err := os.Rename(tmp, path); err != nil {
		t.Fatal(err)
	}
}

// TestGeoIPReload swaps the --geoip database twice while batches keep
// arriving (testdata/geoip/swap.json): once by SIGHUP, once through the
// admin API. Every batch is answered 202, batches sent after a reload get
// the new database's country, and none gets an empty one.
func TestGeoIPReload(t *testing.T) {
	var swap struct {
		Client, Network string
		Databases       []struct{ Name, Country, Reload string }
	}
	readJSON(t, "testdata/geoip/swap.json", &swap)
	db := filepath.Join(t.TempDir(), "country.mmdb")
	writeCountryDB(t, db, swap.Network, swap.Databases[0].Country)
	data := t.TempDir()
	p := startMF(t, data, "serve", "--provision", demoFile, "--geoip", db, "--trusted-proxies", "127.0.0.1",
		"--rate-limit-scale", "1000")

	var n atomic.Int64
	send := func() string {
		id := fmt.Sprintf("9e0a1b2c-0000-4000-8000-%012d", n.Add(1))
		code, _, resp, err := tryDo("POST", p.ingest+"/v1/batch/"+demoWebsiteKey,
			batchBody(id, "full", `{"name":"$pageview","anonymousId":"geo","page":{"url":"https://shop.example/"}}`),
			"Origin", "https://shop.example", "User-Agent", browserUA, "Content-Type", "application/json", "X-Forwarded-For", swap.Client)
		if err != nil || code != 202 {
			t.Errorf("batch %s: %d %s %v; want 202 while the database is swapped", id, code, resp, err)
		}
		return id
	}
	// Batches keep coming while the databases are swapped.
	stop := make(chan struct{})
	var wg sync.WaitGroup
	wg.Add(1)
	go func() {
		defer wg.Done()
		for {
			select {
			case <-stop:
				return
			case <-time.After(5 * time.Millisecond): // a steady flow, not a flood
				send()
			}
		}
	}()
	after := map[string]string{} // batch id -> country it must have
	after[send()] = swap.Databases[0].Country
	for i, d := range swap.Databases[1:] {
		writeCountryDB(t, db, swap.Network, d.Country)
		switch d.Reload {
		case "SIGHUP":
			if err := p.cmd.Process.Signal(syscall.SIGHUP); err != nil {
				t.Fatal(err)
			}
			waitFor(t, 30*time.Second, func() bool {
				return strings.Count(p.out.String(), "GeoIP database reloaded") == i+1
			})
		case "admin":
			if code, _, body := do(t, "POST", p.admin+"/admin/v1/geoip/reload", nil); code != 200 {
				t.Fatalf("POST /admin/v1/geoip/reload: %d %s", code, body)
			}
		}
		after[send()] = d.Country
	}
	close(stop)
	wg.Wait()
	if c := p.stop(time.Minute); c != 0 {
		t.Fatalf("mf serve: exit %d", c)
	}
	batches, _ := readBatches(t, data)
	if len(batches) != int(n.Load()) {
		t.Errorf("the log holds %d batches, %d were sent", len(batches), n.Load())
	}
	known := map[string]bool{}
	for _, d := range swap.Databases {
		known[d.Country] = true
	}
	for id, b := range batches {
		if want, ok := after[id]; ok && b.Edge.Country != want {
			t.Errorf("batch %s sent after the reload to %s has country %q", id, want, b.Edge.Country)
		}
		if !known[b.Edge.Country] {
			t.Errorf("batch %s has country %q, from no database", id, b.Edge.Country)
		}
	}
	if len(after) != len(swap.Databases) {
		t.Fatalf("checked %d reloads", len(after))
	}
}
