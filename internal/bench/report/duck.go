package main

import (
	"bytes"
	"context"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"math"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/mfhq/mf/rollups/tables"
)

// duckInput is what bench.mjs reads.
type duckInput struct {
	Files map[string][]string `json:"files"`
	// Keys are the key columns of the keyed tables among Files: DuckDB
	// reads them merged (docs/rollups.md, "Keyed tables").
	Keys   map[string][]string `json:"keys,omitempty"`
	Lo     int64               `json:"lo"`
	Hi     int64               `json:"hi"`
	Funnel struct {
		Steps    []string `json:"steps"`
		WindowMs int64    `json:"windowMs"`
	} `json:"funnel"`
	Warmup int      `json:"warmup"`
	N      int      `json:"n"`
	Only   []string `json:"only,omitempty"`
}

// tableKeys returns the key columns of the keyed tables among names.
func tableKeys(names []string) map[string][]string {
	out := map[string][]string{}
	for _, n := range names {
		if t := tables.All()[n]; t != nil && len(t.Key) > 0 {
			out[n] = t.Key
		}
	}
	return out
}

// duckOutput is what bench.mjs prints.
type duckOutput struct {
	DuckDB  string `json:"duckdb"`
	Threads string `json:"threads"`
	Results map[string]struct {
		Ms   []float64           `json:"ms"`
		Rows []map[string]string `json:"rows"`
	} `json:"results"`
}

// duckTables are the tables the DuckDB questions read.
var duckTables = []string{"people", "visits", "conversions", "identities"}

// runDuckDB installs the npm packages of duckDir when missing and runs
// bench.mjs with in.
func runDuckDB(ctx context.Context, duckDir string, in duckInput) (*duckOutput, error) {
	for _, tool := range []string{"node", "npm"} {
		if _, err := exec.LookPath(tool); err != nil {
			return nil, fmt.Errorf("%s is not installed; the DuckDB comparison needs Node.js 20 or later with npm (Debian: apt-get install nodejs npm, or go tool task tools)", tool)
		}
	}
	if _, err := os.Stat(filepath.Join(duckDir, "node_modules", "@duckdb", "node-api")); err != nil {
		// npm install keeps to the lock file (npm ci refuses this lock over
		// other platforms' optional bindings, as in rollups/testdata/duckdb).
		cmd := exec.CommandContext(ctx, "npm", "install", "--no-audit", "--no-fund")
		cmd.Dir = duckDir
		if out, err := cmd.CombinedOutput(); err != nil {
			return nil, fmt.Errorf("npm install in %s failed: %v\n%s", duckDir, err, out)
		}
	}
	f, err := os.CreateTemp("", "reportbench-duckdb-*.json")
	if err != nil {
		return nil, fmt.Errorf("cannot write the DuckDB input: %w", err)
	}
	defer os.Remove(f.Name())
	if err := json.NewEncoder(f).Encode(in); err != nil {
		f.Close()
		return nil, fmt.Errorf("cannot write the DuckDB input: %w", err)
	}
	if err := f.Close(); err != nil {
		return nil, fmt.Errorf("cannot write the DuckDB input: %w", err)
	}
	cmd := exec.CommandContext(ctx, "node", "bench.mjs", f.Name())
	cmd.Dir = duckDir
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	out, err := cmd.Output()
	if err != nil {
		return nil, fmt.Errorf("node bench.mjs failed: %v\n%s", err, stderr.String())
	}
	var res duckOutput
	if err := json.Unmarshal(out, &res); err != nil {
		return nil, fmt.Errorf("cannot read the DuckDB answer %.300q: %w", out, err)
	}
	return &res, nil
}

// figure is one number both sides computed.
type figure struct {
	What      string
	API, Duck string
}

// compare checks the API's answer to a question against DuckDB's and
// returns the figures that differ and how many were compared. apiBody is
// the JSON:API document.
func compare(name string, apiBody []byte, rows []map[string]string) (diffs []figure, n int, err error) {
	var doc struct {
		Data json.RawMessage `json:"data"`
	}
	if err := json.Unmarshal(apiBody, &doc); err != nil {
		return nil, 0, fmt.Errorf("cannot read the API's %s answer: %w", name, err)
	}
	check := func(what string, api, duck string) {
		n++
		if api != duck {
			diffs = append(diffs, figure{what, api, duck})
		}
	}
	if len(rows) == 0 && name != "people" {
		return nil, 0, fmt.Errorf("DuckDB gave no row for %s", name)
	}
	switch name {
	case "overview":
		var res struct {
			Attributes struct {
				Numbers []struct {
					Key      string          `json:"key"`
					Value    json.RawMessage `json:"value"`
					Currency *string         `json:"currency"`
					Others   []struct {
						Currency string  `json:"currency"`
						Amount   float64 `json:"amount"`
					} `json:"others"`
				} `json:"numbers"`
			} `json:"attributes"`
		}
		if err := json.Unmarshal(doc.Data, &res); err != nil {
			return nil, 0, fmt.Errorf("cannot read the API's overview: %w", err)
		}
		got := map[string]string{}
		apiRevenue := map[string]string{}
		for _, x := range res.Attributes.Numbers {
			got[x.Key] = string(x.Value)
			if x.Key == "revenue" && x.Currency != nil && string(x.Value) != "null" {
				v, _ := strconv.ParseFloat(string(x.Value), 64)
				apiRevenue[*x.Currency] = money(v)
				for _, o := range x.Others {
					apiRevenue[o.Currency] = money(o.Amount)
				}
			}
		}
		for _, k := range []string{"people", "newPeople", "known", "buyers"} {
			check(k, orMissing(got, k), rows[0][k])
		}
		var duckRevenue []struct {
			Currency string `json:"currency"`
			Micro    string `json:"micro"`
		}
		if r := rows[0]["revenue"]; r != "" {
			if err := json.Unmarshal([]byte(r), &duckRevenue); err != nil {
				return nil, 0, fmt.Errorf("cannot read DuckDB's revenue %q: %w", r, err)
			}
		}
		duck := map[string]string{}
		for _, r := range duckRevenue {
			m, _ := strconv.ParseInt(r.Micro, 10, 64)
			duck[r.Currency] = money(float64(m) / 1e6)
		}
		check("revenue", fmtMap(apiRevenue), fmtMap(duck))
	case "funnel":
		var res struct {
			Attributes struct {
				Steps []struct {
					Count json.Number `json:"count"`
				} `json:"steps"`
			} `json:"attributes"`
		}
		if err := json.Unmarshal(doc.Data, &res); err != nil {
			return nil, 0, fmt.Errorf("cannot read the API's funnel: %w", err)
		}
		for i := range max(len(res.Attributes.Steps), len(rows[0])) {
			api := "missing"
			if i < len(res.Attributes.Steps) {
				api = res.Attributes.Steps[i].Count.String()
			}
			k := "step" + strconv.Itoa(i+1)
			check(k, api, orMissing(rows[0], k))
		}
	case "channels":
		var res []struct {
			ID         string                     `json:"id"`
			Attributes map[string]json.RawMessage `json:"attributes"`
		}
		if err := json.Unmarshal(doc.Data, &res); err != nil {
			return nil, 0, fmt.Errorf("cannot read the API's channels: %w", err)
		}
		api := map[string]map[string]string{}
		for _, c := range res {
			api[c.ID] = map[string]string{}
			for k, v := range c.Attributes {
				api[c.ID][k] = string(v)
			}
		}
		duck := map[string]map[string]string{}
		for _, r := range rows {
			duck[r["channel"]] = r
		}
		var ids []string
		for id := range api {
			ids = append(ids, id)
		}
		for id := range duck {
			if _, ok := api[id]; !ok {
				ids = append(ids, id)
			}
		}
		slices.Sort(ids)
		for _, id := range ids {
			for _, k := range []string{"visits", "people", "newPeople", "buyers", "customers"} {
				a, d := "0", "0"
				if m, ok := api[id]; ok {
					a = orMissing(m, k)
				}
				if m, ok := duck[id]; ok {
					d = orMissing(m, k)
				}
				check(id+"."+k, a, d)
			}
		}
	case "people":
		var res []struct {
			ID         string `json:"id"`
			Attributes struct {
				LastSeen string      `json:"lastSeen"`
				Visits   json.Number `json:"visits"`
			} `json:"attributes"`
		}
		if err := json.Unmarshal(doc.Data, &res); err != nil {
			return nil, 0, fmt.Errorf("cannot read the API's people: %w", err)
		}
		for i := range max(len(res), len(rows)) {
			a, d := "missing", "missing"
			if i < len(res) {
				p := res[i]
				ls := "bad moment " + p.Attributes.LastSeen
				if t, err := time.Parse("2006-01-02T15:04:05.000-07:00", p.Attributes.LastSeen); err == nil {
					ls = strconv.FormatInt(t.UnixMilli(), 10)
				}
				a = fmt.Sprintf("%s last %s visits %s", strings.ToLower(p.ID), ls, p.Attributes.Visits)
			}
			if i < len(rows) {
				r := rows[i]
				d = fmt.Sprintf("%s last %s visits %s", uuidOfHex(r["ref"]), r["lastSeen"], r["visits"])
			}
			check(fmt.Sprintf("row %d", i+1), a, d)
		}
	default:
		return nil, 0, errors.New("unknown question " + name)
	}
	return diffs, n, nil
}

func orMissing(m map[string]string, k string) string {
	if v, ok := m[k]; ok {
		return v
	}
	return "missing"
}

// money writes an amount with cents (amounts of the bench have two
// decimals; a sum of them is exact in micro-units).
func money(v float64) string { return strconv.FormatFloat(math.Round(v*100)/100, 'f', 2, 64) }

func fmtMap(m map[string]string) string {
	keys := make([]string, 0, len(m))
	for k := range m {
		keys = append(keys, k)
	}
	slices.Sort(keys)
	var b strings.Builder
	for i, k := range keys {
		if i > 0 {
			b.WriteByte(' ')
		}
		b.WriteString(k + ":" + m[k])
	}
	return b.String()
}

// uuidOfHex writes 32 hex digits as a UUID.
func uuidOfHex(h string) string {
	b, err := hex.DecodeString(h)
	if err != nil || len(b) != 16 {
		return "bad ref " + h
	}
	s := hex.EncodeToString(b)
	return s[0:8] + "-" + s[8:12] + "-" + s[12:16] + "-" + s[16:20] + "-" + s[20:]
}
