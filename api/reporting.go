package api

import (
	"log/slog"

	"github.com/gofiber/fiber/v2"
)

// ReportingConfig configures the reporting API (/api/v1).
type ReportingConfig struct{}

// securityHeaders are sent on every reporting answer; the API sends no CORS
// headers.
func securityHeaders(c *fiber.Ctx) error {
	c.Set("X-Content-Type-Options", "nosniff")
	c.Set("X-Frame-Options", "DENY")
	c.Set("Referrer-Policy", "strict-origin-when-cross-origin")
	c.Set("Content-Security-Policy", "default-src 'none'; frame-ancestors 'none'")
	return c.Next()
}

// NewReporting builds the reporting API's Fiber app.
func NewReporting(cfg ReportingConfig, ready func() bool, logger *slog.Logger) *fiber.App {
	app := fiber.New(fiber.Config{DisableStartupMessage: true})
	app.Get("/healthz", Healthz(ready))
	app.Use(securityHeaders)
	app.Use("/api/v1", func(c *fiber.Ctx) error {
		if c.Method() != fiber.MethodGet && c.Method() != fiber.MethodHead {
			c.Set(fiber.HeaderAllow, "GET, HEAD")
			return jsonAPIError(c, fiber.StatusMethodNotAllowed, "Method not allowed", "the reporting API answers GET and HEAD only")
		}
		return c.Next()
	})
	app.Use(func(c *fiber.Ctx) error {
		return jsonAPIError(c, fiber.StatusNotFound, "Not found", "no such endpoint")
	})
	return app
}

// jsonAPIError writes a JSON:API errors document.
func jsonAPIError(c *fiber.Ctx, status int, title, detail string) error {
	c.Set(fiber.HeaderContentType, "application/vnd.api+json")
	return c.Status(status).JSON(fiber.Map{"errors": []fiber.Map{{"status": itoa(status), "title": title, "detail": detail}}},
		"application/vnd.api+json")
}

func itoa(n int) string {
	if n == 0 {
		return "0"
	}
	var b [20]byte
	i := len(b)
	for n > 0 {
		i--
		b[i] = byte('0' + n%10)
		n /= 10
	}
	return string(b[i:])
}
