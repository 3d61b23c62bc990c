package ingest

import (
	"bytes"
	"compress/gzip"
	"crypto/sha256"
	"encoding/hex"
	"fmt"

	"github.com/andybalholm/brotli"
	"github.com/gofiber/fiber/v2"

	"github.com/mfhq/mf/ingest/client/browser"
	"github.com/mfhq/mf/wasm"
)

// Cache lifetimes of the browser client (contracts/browser.md, section 1).
const (
	sdkCurrentCache   = "public, max-age=300"
	sdkImmutableCache = "public, max-age=31536000, immutable"
	javascriptType    = "text/javascript" // module scripts are always UTF-8
)

// SDKFiles are the files of one version of the browser client, by name:
// mf.mjs, and what it loads when a flag is evaluated (evaluator.mjs,
// evaluator.wasm), each with gzip and brotli copies.
type SDKFiles struct {
	Version string
	Files   map[string]wasm.File
}

// NewSDKFiles compresses the embedded browser client and its evaluator
// module once; the WebAssembly comes precompressed from package wasm.
func NewSDKFiles() (SDKFiles, error) {
	v := browser.Version()
	if v == "" {
		return SDKFiles{}, fmt.Errorf("the browser client has no VERSION constant")
	}
	files := map[string]wasm.File{"evaluator.wasm": wasm.Module()}
	for name, src := range map[string][]byte{"mf.mjs": browser.Minified, "evaluator.mjs": wasm.JS()} {
		f, err := compressedFile(src, javascriptType)
		if err != nil {
			return SDKFiles{}, fmt.Errorf("cannot compress %s of the browser client: %w", name, err)
		}
		files[name] = f
	}
	return SDKFiles{Version: v, Files: files}, nil
}

func compressedFile(raw []byte, contentType string) (wasm.File, error) {
	var gz, br bytes.Buffer
	zw, err := gzip.NewWriterLevel(&gz, gzip.BestCompression)
	if err != nil {
		return wasm.File{}, err
	}
	if _, err := zw.Write(raw); err != nil {
		return wasm.File{}, err
	}
	if err := zw.Close(); err != nil {
		return wasm.File{}, err
	}
	bw := brotli.NewWriterLevel(&br, brotli.BestCompression)
	if _, err := bw.Write(raw); err != nil {
		return wasm.File{}, err
	}
	if err := bw.Close(); err != nil {
		return wasm.File{}, err
	}
	sum := sha256.Sum256(raw)
	return wasm.File{Hash: hex.EncodeToString(sum[:16]), ContentType: contentType, Raw: raw, Gzip: gz.Bytes(), Brotli: br.Bytes()}, nil
}

// sdkRoutes serves the browser client: /v1/sdk/mf.mjs, the current
// version, cached 5 minutes; /v1/sdk/{version}/{file}, immutable. An
// unknown version or file answers 404.
func sdkRoutes(app *fiber.App, sdk SDKFiles) {
	app.Get("/v1/sdk/mf.mjs", func(c *fiber.Ctx) error {
		return sendFile(c, sdk.Files["mf.mjs"], sdkCurrentCache)
	})
	app.Get("/v1/sdk/:version/:file", func(c *fiber.Ctx) error {
		f, ok := sdk.Files[c.Params("file")]
		if !ok || c.Params("version") != sdk.Version {
			return sendMessage(c, fiber.StatusNotFound, "Not found: this browser client version is not served; see /v1/sdk/mf.mjs")
		}
		return sendFile(c, f, sdkImmutableCache)
	})
}

// sendFile answers with the representation of f that Accept-Encoding
// picks, its entity tag, and 304 to a matching If-None-Match.
func sendFile(c *fiber.Ctx, f wasm.File, cache string) error {
	body, enc := f.Negotiate(c.Get(fiber.HeaderAcceptEncoding))
	c.Set(fiber.HeaderVary, "Accept-Encoding")
	c.Set(fiber.HeaderCacheControl, cache)
	c.Set(fiber.HeaderETag, f.ETag(enc))
	if enc != "" {
		c.Set(fiber.HeaderContentEncoding, enc)
	}
	if match := c.Get(fiber.HeaderIfNoneMatch); match != "" && match == f.ETag(enc) {
		return c.SendStatus(fiber.StatusNotModified)
	}
	c.Set(fiber.HeaderContentType, f.ContentType)
	return c.Send(body)
}
