package ingest

import (
	"net/http"
	"strconv"
	"time"

	"github.com/gofiber/fiber/v2"
)

// maxBatchBody is the batch body limit of the specification (413 above it).
const maxBatchBody = 1 << 20

// readBodyLimit is the largest body the web server reads before refusing.
const readBodyLimit = 8 << 20

// sendTooLarge answers a body over the batch limit: 413 with the
// `{message}` body of answers from the web server (and the code
// payload_too_large of the error table beside it).
func sendTooLarge(c *fiber.Ctx) error {
	return c.Status(fiber.StatusRequestEntityTooLarge).JSON(fiber.Map{
		"message": "Payload too large: the body is over 1,048,576 bytes; split the batch",
		"code":    CodePayloadTooLarge,
	})
}

// Error codes of the /v1 service besides those of batch decoding.
const (
	CodeUnauthorized        = "unauthorized"
	CodeWebsiteKeyAsBearer  = "website_key_as_bearer"
	CodeSecretKeyInPath     = "secret_key_in_path"
	CodeSecretKeyExposed    = "secret_key_exposed"
	CodeOriginNotAllowed    = "origin_not_allowed"
	CodeLookupNotAllowed    = "lookup_not_allowed"
	CodeNotFound            = "not_found"
	CodePayloadTooLarge     = "payload_too_large"
	CodeInvalidUnits        = "invalid_units"
	CodeTooManyUnits        = "too_many_units"
	CodeRateLimited         = "rate_limited"
	CodeSinkUnavailable     = "sink_unavailable"
	CodeInternalError       = "internal_error"
	ReceiptBot              = "bot"
	ReceiptIngestionPaused  = "ingestion_paused"
	ReceiptAllowanceExhaust = "allowance_exhausted"
)

func problem(status int, code, detail string) *Problem {
	return &Problem{Status: status, Code: code, Detail: detail}
}

func errUnauthorized(detail string) *Problem {
	return problem(http.StatusUnauthorized, CodeUnauthorized, detail)
}

// sendProblem writes an error body (code, detail, and for
// validation_failed up to ten field errors); a positive retryAfter is sent
// as Retry-After in whole seconds. The CORS headers are already set by the
// middleware that runs before every handler.
func sendProblem(c *fiber.Ctx, p *Problem, retryAfter time.Duration) error {
	if len(p.Errors) > 10 {
		p.Errors = p.Errors[:10]
	}
	if retryAfter > 0 {
		c.Set(fiber.HeaderRetryAfter, strconv.Itoa(retryAfterSeconds(retryAfter)))
	}
	return c.Status(p.Status).JSON(p)
}

func sendRateLimited(c *fiber.Ctx, wait time.Duration) error {
	return sendProblem(c, problem(http.StatusTooManyRequests, CodeRateLimited,
		"rate limit spent; retry after the number of seconds in Retry-After"), wait)
}

func sendSinkUnavailable(c *fiber.Ctx) error {
	return sendProblem(c, problem(http.StatusServiceUnavailable, CodeSinkUnavailable,
		"the batch could not be stored; resend it unchanged"), time.Second)
}

// logFullRetryAfter is the Retry-After of a batch refused because the log
// is full: room returns as committed batches are purged, not in a second.
const logFullRetryAfter = 30 * time.Second

// sendLogFull answers a batch the log refused for want of room: the
// specification's 503 sink_unavailable (nothing was stored; resend it
// unchanged), with a longer Retry-After than an outage's.
func sendLogFull(c *fiber.Ctx) error {
	return sendProblem(c, problem(http.StatusServiceUnavailable, CodeSinkUnavailable,
		"the batch could not be stored: the log is full; resend it unchanged after Retry-After"), logFullRetryAfter)
}

// sendMessage writes the `{message}` body of answers produced before the
// request reaches the API proper: unknown paths, key-looking failures,
// bodies refused as too large, maintenance.
func sendMessage(c *fiber.Ctx, status int, msg string) error {
	return c.Status(status).JSON(fiber.Map{"message": msg})
}

// setCORS sets the CORS headers that every /v1 answer carries, errors and
// preflights included.
func setCORS(c *fiber.Ctx) {
	c.Set(fiber.HeaderAccessControlAllowOrigin, "*")
	c.Set(fiber.HeaderAccessControlAllowMethods, "GET, POST, OPTIONS")
	c.Set(fiber.HeaderAccessControlAllowHeaders, "Authorization, Content-Type")
	c.Set(fiber.HeaderAccessControlExposeHeaders, "Retry-After")
	c.Set(fiber.HeaderAccessControlMaxAge, "86400")
}
