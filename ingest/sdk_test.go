package ingest

import (
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"os"
	"sort"
	"testing"
)

// TestSDKVersionImmutable: /v1/sdk/{version}/ is cached for a year, so the
// files of a version never change. testdata/sdk-versions.json records the
// SHA-256 of each version's files; a change to mf.mjs, evaluator.mjs or the
// evaluator's WebAssembly needs a new VERSION (mf.mjs and package.json) and
// a new line there.
func TestSDKVersionImmutable(t *testing.T) {
	sdk, err := NewSDKFiles()
	if err != nil {
		t.Fatal(err)
	}
	names := make([]string, 0, len(sdk.Files))
	for n := range sdk.Files {
		names = append(names, n)
	}
	sort.Strings(names)
	h := sha256.New()
	for _, n := range names {
		h.Write([]byte(n + "\x00"))
		h.Write(sdk.Files[n].Raw)
		h.Write([]byte{0})
	}
	sum := hex.EncodeToString(h.Sum(nil))
	b, err := os.ReadFile("testdata/sdk-versions.json")
	if err != nil {
		t.Fatal(err)
	}
	var recorded map[string]string
	if err := json.Unmarshal(b, &recorded); err != nil {
		t.Fatalf("testdata/sdk-versions.json: %v", err)
	}
	switch want, ok := recorded[sdk.Version]; {
	case !ok:
		t.Fatalf("version %s of the browser client is not recorded: add %q: %q to ingest/testdata/sdk-versions.json", sdk.Version, sdk.Version, sum)
	case want != sum:
		t.Fatalf("the files of browser client version %s changed (sum %s, recorded %s); they are served as immutable: "+
			"raise VERSION in ingest/client/browser/mf.mjs and package.json and record the new version", sdk.Version, sum, want)
	}
}
