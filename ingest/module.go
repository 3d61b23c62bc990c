package ingest

import (
	"github.com/gofiber/fiber/v2"

	"github.com/mfhq/mf/wasm"
)

// moduleRoutes serves the WebAssembly evaluator that browsers run, at a
// versioned URL (/v1/evaluator/<hash>.wasm) with brotli or gzip and
// immutable caching, so a browser loads it once per version. A stable
// /v1/evaluator/latest.wasm redirects to the current version and is never
// cached.
func moduleRoutes(app *fiber.App, mod wasm.File) {
	app.Get("/v1/evaluator/latest.wasm", func(c *fiber.Ctx) error {
		c.Set(fiber.HeaderCacheControl, "no-cache")
		return c.Redirect("/v1/evaluator/"+mod.Name(), fiber.StatusFound)
	})
	app.Get("/v1/evaluator/:name", func(c *fiber.Ctx) error {
		if c.Params("name") != mod.Name() {
			return sendMessage(c, fiber.StatusNotFound, "Not found: this evaluator version is not served; see /v1/evaluator/latest.wasm")
		}
		body, enc := mod.Negotiate(c.Get(fiber.HeaderAcceptEncoding))
		c.Set(fiber.HeaderVary, "Accept-Encoding")
		c.Set(fiber.HeaderCacheControl, "public, max-age=31536000, immutable")
		c.Set(fiber.HeaderETag, mod.ETag(enc))
		if enc != "" {
			c.Set(fiber.HeaderContentEncoding, enc)
		}
		if match := c.Get(fiber.HeaderIfNoneMatch); match != "" && match == mod.ETag(enc) {
			return c.SendStatus(fiber.StatusNotModified)
		}
		c.Set(fiber.HeaderContentType, mod.ContentType)
		return c.Send(body)
	})
}
