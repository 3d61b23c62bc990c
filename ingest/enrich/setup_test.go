package enrich

import (
	"bufio"
	"encoding/json"
	"fmt"
	"log/slog"
	"net"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/maxmind/mmdbwriter"
	"github.com/maxmind/mmdbwriter/mmdbtype"
	"github.com/mfhq/mf/internal/apptest"
)

// readTSV returns the rows of a tab-separated testdata file, skipping
// blank lines and lines starting with '#'. Each row must have cols fields;
// a field "-" reads as "".
func readTSV(t testing.TB, name string, cols int) [][]string {
	t.Helper()
	f, err := os.Open(filepath.Join("testdata", name))
	if err != nil {
		t.Fatalf("cannot open test data: %v", err)
	}
	defer f.Close()
	var rows [][]string
	s := bufio.NewScanner(f)
	s.Buffer(make([]byte, 64<<10), 1<<20)
	for line := 1; s.Scan(); line++ {
		l := s.Text()
		if strings.TrimSpace(l) == "" || l[0] == '#' {
			continue
		}
		fs := strings.Split(l, "\t")
		if len(fs) != cols {
			t.Fatalf("%s:%d: %d fields, want %d", name, line, len(fs), cols)
		}
		for i := range fs {
			if fs[i] == "-" {
				fs[i] = ""
			}
		}
		rows = append(rows, fs)
	}
	if err := s.Err(); err != nil {
		t.Fatalf("cannot read %s: %v", name, err)
	}
	if len(rows) == 0 {
		t.Fatalf("%s has no cases", name)
	}
	return rows
}

// readLines returns the non-comment, non-blank lines of a testdata file.
func readLines(t testing.TB, name string) []string {
	t.Helper()
	data, err := os.ReadFile(filepath.Join("testdata", name))
	if err != nil {
		t.Fatalf("cannot open test data: %v", err)
	}
	var out []string
	for l := range strings.Lines(string(data)) {
		l = strings.TrimRight(l, "\r\n")
		if strings.TrimSpace(l) == "" || l[0] == '#' {
			continue
		}
		out = append(out, l)
	}
	if len(out) == 0 {
		t.Fatalf("%s has no cases", name)
	}
	return out
}

// newEnricher returns an Enricher over a fresh local bucket.
func newEnricher(t testing.TB, cfg Config) *Enricher {
	t.Helper()
	e, err := New(cfg, NewBucketSaltStore(apptest.OpenBucket(t, t.TempDir())), nil)
	if err != nil {
		t.Fatalf("New: %v", err)
	}
	t.Cleanup(func() { e.Close() })
	return e
}

// geoFixture is testdata/geo.json.
type geoFixture struct {
	Databases map[string]struct {
		Type      string `json:"type"`
		IPVersion int    `json:"ipVersion"`
		Networks  []struct {
			Network string         `json:"network"`
			Record  map[string]any `json:"record"`
		} `json:"networks"`
	} `json:"databases"`
	Lookups []struct {
		DB      string `json:"db"`
		Addr    string `json:"addr"`
		Country string `json:"country"`
		Region  string `json:"region"`
	} `json:"lookups"`
}

func loadGeoFixture(t testing.TB) geoFixture {
	t.Helper()
	data, err := os.ReadFile(filepath.Join("testdata", "geo.json"))
	if err != nil {
		t.Fatalf("cannot open test data: %v", err)
	}
	var f geoFixture
	if err := json.Unmarshal(data, &f); err != nil {
		t.Fatalf("cannot parse geo.json: %v", err)
	}
	return f
}

// writeGeoDB builds database name of the fixture with mmdbwriter and
// writes it to path.
func writeGeoDB(t testing.TB, f geoFixture, name, path string) {
	t.Helper()
	d, ok := f.Databases[name]
	if !ok {
		t.Fatalf("geo.json has no database %q", name)
	}
	tree, err := mmdbwriter.New(mmdbwriter.Options{
		DatabaseType:            d.Type,
		IPVersion:               d.IPVersion,
		RecordSize:              28,
		IncludeReservedNetworks: true, // the fixture uses documentation ranges
	})
	if err != nil {
		t.Fatalf("cannot create database %s: %v", name, err)
	}
	for _, n := range d.Networks {
		_, ipnet, err := net.ParseCIDR(n.Network)
		if err != nil {
			t.Fatalf("geo.json: %v", err)
		}
		if err := tree.Insert(ipnet, toMMDB(t, n.Record)); err != nil {
			t.Fatalf("cannot insert %s into %s: %v", n.Network, name, err)
		}
	}
	out, err := os.Create(path)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := tree.WriteTo(out); err != nil {
		t.Fatalf("cannot write database %s: %v", name, err)
	}
	if err := out.Close(); err != nil {
		t.Fatal(err)
	}
}

// toMMDB converts decoded JSON to MaxMind DB values (numbers as doubles).
func toMMDB(t testing.TB, v any) mmdbtype.DataType {
	switch v := v.(type) {
	case map[string]any:
		m := mmdbtype.Map{}
		for k, x := range v {
			m[mmdbtype.String(k)] = toMMDB(t, x)
		}
		return m
	case []any:
		s := mmdbtype.Slice{}
		for _, x := range v {
			s = append(s, toMMDB(t, x))
		}
		return s
	case string:
		return mmdbtype.String(v)
	case float64:
		return mmdbtype.Float64(v)
	case bool:
		return mmdbtype.Bool(v)
	}
	t.Fatalf("geo.json: cannot store %T in a database", v)
	return nil
}

// geoDBPath builds database name into a fresh temporary file.
func geoDBPath(t testing.TB, name string) string {
	t.Helper()
	p := filepath.Join(t.TempDir(), fmt.Sprintf("%s.mmdb", name))
	writeGeoDB(t, loadGeoFixture(t), name, p)
	return p
}

func discardLogger() *slog.Logger { return slog.New(slog.DiscardHandler) }
