package main

import (
	"bytes"
	"encoding/json"
	"os"
	"path/filepath"
	"testing"

	"github.com/mfhq/mf/evaluator/internal/corpusgen/oracle"
)

const testdata = "../../testdata"

// TestCommittedFilesUpToDate: the committed corpus and document are what
// the generator writes now (regenerate with go run ./evaluator/internal/corpusgen).
func TestCommittedFilesUpToDate(t *testing.T) {
	for name, write := range map[string]func(w *bytes.Buffer) error{
		"corpus.jsonl":      func(w *bytes.Buffer) error { _, err := write(w); return err },
		"document_100.json": func(w *bytes.Buffer) error { _, err := writeDocument(w); return err },
	} {
		var buf bytes.Buffer
		if err := write(&buf); err != nil {
			t.Fatalf("%s: %v", name, err)
		}
		committed, err := os.ReadFile(filepath.Join(testdata, name))
		if err != nil {
			t.Fatalf("cannot read the committed %s: %v", name, err)
		}
		if !bytes.Equal(buf.Bytes(), committed) {
			t.Errorf("evaluator/testdata/%s is not what the generator writes; run go run ./evaluator/internal/corpusgen", name)
		}
	}
}

// TestCasesUnique: every case has a distinct name and the corpus has at
// least 10,000 cases.
func TestCasesUnique(t *testing.T) {
	cases := generate(Seed)
	if len(cases) < 10000 {
		t.Fatalf("%d cases, want at least 10000", len(cases))
	}
	seen := map[string]bool{}
	for _, c := range cases {
		if seen[c.name] {
			t.Errorf("case name %q repeats", c.name)
		}
		seen[c.name] = true
	}
}

// TestOracleSpecVectors: the oracle's hashing agrees with the
// specification's check table.
func TestOracleSpecVectors(t *testing.T) {
	raw, err := os.ReadFile(filepath.Join(testdata, "spec_vectors.json"))
	if err != nil {
		t.Fatal(err)
	}
	var v struct {
		Fnv1a32 []struct {
			Input string
			Want  uint32
		}
		Bucket []struct {
			Seed, Salt, Unit string
			Want             int
		}
	}
	if err := json.Unmarshal(raw, &v); err != nil {
		t.Fatal(err)
	}
	for _, c := range v.Fnv1a32 {
		if got := oracle.Fnv1a32(c.Input); got != c.Want {
			t.Errorf("oracle.Fnv1a32(%q) = %d, want %d", c.Input, got, c.Want)
		}
	}
	for _, c := range v.Bucket {
		if got := oracle.Bucket(c.Seed, c.Salt, c.Unit); got != c.Want {
			t.Errorf("oracle.Bucket(%q, %q, %q) = %d, want %d", c.Seed, c.Salt, c.Unit, got, c.Want)
		}
	}
}
