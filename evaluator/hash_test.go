package evaluator_test

import (
	"encoding/json"
	"math"
	"os"
	"strconv"
	"testing"

	"github.com/mfhq/mf/evaluator"
)

func readJSONFile(t *testing.T, path string, v any) {
	t.Helper()
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatalf("cannot read %s: %v", path, err)
	}
	if err := json.Unmarshal(b, v); err != nil {
		t.Fatalf("cannot decode %s: %v", path, err)
	}
}

// TestSpecVectors checks the specification's hashing check table.
func TestSpecVectors(t *testing.T) {
	var v struct {
		Fnv1a32 []struct {
			Input string `json:"input"`
			Want  uint32 `json:"want"`
		} `json:"fnv1a32"`
		Bucket []struct {
			Seed, Salt, Unit string
			Inner, Outer     uint32
			Want             uint32
		} `json:"bucket"`
	}
	readJSONFile(t, "testdata/spec_vectors.json", &v)
	if len(v.Fnv1a32) == 0 || len(v.Bucket) == 0 {
		t.Fatal("testdata/spec_vectors.json holds no vectors")
	}
	for _, c := range v.Fnv1a32 {
		if got := evaluator.Fnv1a32(c.Input); got != c.Want {
			t.Errorf("Fnv1a32(%q) = %d, want %d", c.Input, got, c.Want)
		}
	}
	for _, c := range v.Bucket {
		inner := evaluator.Fnv1a32(c.Seed + c.Salt + c.Unit)
		if inner != c.Inner {
			t.Errorf("inner hash of %q = %d, want %d", c.Seed+c.Salt+c.Unit, inner, c.Inner)
		}
		if outer := evaluator.Fnv1a32(strconv.FormatUint(uint64(inner), 10)); outer != c.Outer {
			t.Errorf("outer hash of %d = %d, want %d", inner, outer, c.Outer)
		}
		if got := evaluator.Bucket(c.Seed, c.Salt, c.Unit); got != c.Want {
			t.Errorf("Bucket(%q, %q, %q) = %d, want %d", c.Seed, c.Salt, c.Unit, got, c.Want)
		}
	}
}

// TestGrowthBookHashV2 checks Bucket against GrowthBook's published
// version-2 hash vectors: bucket(seed+salt, unit) = hash(seed, value, 2)
// times 10,000, however the GrowthBook seed is split into seed and salt.
func TestGrowthBookHashV2(t *testing.T) {
	var v struct {
		Header map[string]string `json:"header"`
		Cases  [][3]any          `json:"cases"`
	}
	readJSONFile(t, "testdata/growthbook_hash_v2.json", &v)
	if v.Header["source"] == "" || v.Header["commit"] == "" {
		t.Fatal("testdata/growthbook_hash_v2.json lacks its citation (header.source, header.commit)")
	}
	if len(v.Cases) < 7 {
		t.Fatalf("want the 7 version-2 vectors, found %d", len(v.Cases))
	}
	for _, c := range v.Cases {
		seed, _ := c[0].(string)
		value, _ := c[1].(string)
		want := uint32(math.Round(c[2].(float64) * 10000))
		for split := 0; split <= len(seed); split++ {
			if got := evaluator.Bucket(seed[:split], seed[split:], value); got != want {
				t.Errorf("Bucket(%q, %q, %q) = %d, want %d (GrowthBook %v)", seed[:split], seed[split:], value, got, want, c[2])
			}
		}
	}
}

func TestUsableID(t *testing.T) {
	var cases []struct {
		ID     string `json:"id"`
		Usable bool   `json:"usable"`
	}
	readJSONFile(t, "testdata/usable_ids.json", &cases)
	for _, c := range cases {
		if got := evaluator.UsableID(c.ID); got != c.Usable {
			t.Errorf("UsableID(%q) = %v, want %v", c.ID, got, c.Usable)
		}
	}
}
