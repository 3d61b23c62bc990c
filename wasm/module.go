package wasm

import (
	"crypto/sha256"
	_ "embed" // the module and its precompressed variants
	"encoding/hex"
	"strconv"
	"strings"
)

// The evaluator module, committed in dist/ so that a fresh clone builds
// without a wasip1 toolchain step. `go generate ./wasm` rewrites all three;
// TestDistIsFresh fails when they are out of date.
//
//go:generate go run ./internal/gen -dir dist
var (
	//go:embed dist/evaluator.wasm
	moduleRaw []byte
	//go:embed dist/evaluator.wasm.gz
	moduleGzip []byte
	//go:embed dist/evaluator.wasm.br
	moduleBrotli []byte
)

// ContentType is the media type of the module, which browsers require for
// WebAssembly.instantiateStreaming.
const ContentType = "application/wasm"

// File is the evaluator module as served to browsers: the raw bytes, the
// same bytes precompressed, and a content hash for a versioned, immutable
// URL such as /v1/evaluator/<Hash>.wasm. It holds no HTTP types; the ingest
// service writes the headers.
type File struct {
	// Hash is the first 16 bytes of the SHA-256 of Raw, in lower-case hex
	// (32 characters). It changes whenever the module does.
	Hash string
	// ContentType is "application/wasm".
	ContentType string
	// Raw is the module (identity encoding).
	Raw []byte
	// Gzip is Raw compressed with gzip (Content-Encoding: gzip).
	Gzip []byte
	// Brotli is Raw compressed with brotli (Content-Encoding: br).
	Brotli []byte
}

// Module returns the embedded evaluator module. It hashes the module on each
// call (a few milliseconds): call it once at start-up and keep the File. The
// byte slices are shared; callers must not modify them.
func Module() File {
	sum := sha256.Sum256(moduleRaw)
	return File{
		Hash:        hex.EncodeToString(sum[:16]),
		ContentType: ContentType,
		Raw:         moduleRaw,
		Gzip:        moduleGzip,
		Brotli:      moduleBrotli,
	}
}

// Name is the file name of the versioned module, <Hash>.wasm.
func (f File) Name() string { return f.Hash + ".wasm" }

// ETag is a strong entity tag for the module, the same for every encoding's
// representation family: "<Hash>" plus the encoding, as HTTP requires
// distinct tags for distinct encodings.
func (f File) ETag(encoding string) string {
	if encoding == "" {
		return strconv.Quote(f.Hash)
	}
	return strconv.Quote(f.Hash + "-" + encoding)
}

// Negotiate picks the representation for an Accept-Encoding header value:
// brotli when acceptable, else gzip, else the raw module. It returns the
// body and the Content-Encoding value ("br", "gzip", or "" for identity).
// Codings with q=0 are refused; "*" stands for any coding not listed.
// Responses should carry Vary: Accept-Encoding.
func (f File) Negotiate(acceptEncoding string) (body []byte, encoding string) {
	br, gz := acceptQ(acceptEncoding, "br"), acceptQ(acceptEncoding, "gzip")
	switch {
	case br > 0 && br >= gz:
		return f.Brotli, "br"
	case gz > 0:
		return f.Gzip, "gzip"
	}
	return f.Raw, ""
}

// acceptQ returns the quality (0 to 1000) the Accept-Encoding header value
// gives coding: its own entry, else the "*" entry, else 0.
func acceptQ(header, coding string) int {
	q, star := -1, -1
	for part := range strings.SplitSeq(header, ",") {
		name, params, _ := strings.Cut(strings.TrimSpace(part), ";")
		name = strings.TrimSpace(name)
		v := 1000
		for param := range strings.SplitSeq(params, ";") {
			k, val, ok := strings.Cut(strings.TrimSpace(param), "=")
			if ok && strings.EqualFold(strings.TrimSpace(k), "q") {
				v = parseQ(strings.TrimSpace(val))
			}
		}
		switch {
		case strings.EqualFold(name, coding):
			q = v
		case name == "*":
			star = v
		}
	}
	if q >= 0 {
		return q
	}
	return max(star, 0)
}

// parseQ reads an HTTP qvalue ("1", "0.5", "0.125") as thousandths; anything
// unreadable counts as 0.
func parseQ(s string) int {
	whole, frac, _ := strings.Cut(s, ".")
	if whole != "0" && whole != "1" || len(frac) > 3 {
		return 0
	}
	v := 0
	if whole == "1" {
		v = 1000
	}
	for i, scale := 0, 100; i < len(frac); i, scale = i+1, scale/10 {
		d := frac[i]
		if d < '0' || d > '9' || whole == "1" && d != '0' {
			return 0
		}
		v += int(d-'0') * scale
	}
	return v
}
