//go:build mffaults

package main

import (
	"log/slog"
	"os"
	"time"

	"github.com/gofiber/fiber/v2"

	"github.com/mfhq/mf/processor"
)

// faultInjection: this is the fault build (go build -tags mffaults), made
// by the tests only, never shipped. A request with the header
// X-Mf-Test-Panic panics in its route's handlers (those of a route
// registered for a path, not the middleware that runs for every path):
// "runtime" with a runtime error (a nil map written), anything else with
// a string that carries the header's value, which must never reach the
// log.
const faultInjection = true

func injectPanic(c *fiber.Ctx) error {
	v := c.Get("X-Mf-Test-Panic")
	if v == "" || c.Route().Path == "/" {
		return c.Next()
	}
	if v == "runtime" {
		var m map[string]int
		m[v]++
	}
	panic("injected panic carrying " + v)
}

// faultHook is the processor's fault hook (processor.Deps.Hook): when the
// processor reaches the point that MF_TEST_CRASH_AT names (such as
// "erasure-written"), mf logs "fault point reached" with the point and
// stops there for good, for the test to kill it (SIGKILL) as a crash at
// that point would.
func faultHook(logger *slog.Logger) func(point string) {
	at := os.Getenv("MF_TEST_CRASH_AT")
	if at == "" {
		return nil
	}
	return func(point string) {
		if point != at {
			return
		}
		logger.Error("fault point reached", "point", point)
		select {}
	}
}

// faultClock applies the fault build's processor settings to cfg and
// deps: MF_TEST_CLOCK_OFFSET (a duration such as 240h) moves the
// processor's clock (the days retention counts from) ahead of the real
// time by that much, MF_TEST_RETENTION_INTERVAL (a duration) is how often
// it looks at retention. Each is logged when set.
func faultClock(cfg *processor.Config, deps *processor.Deps, logger *slog.Logger) {
	if v := os.Getenv("MF_TEST_CLOCK_OFFSET"); v != "" {
		d, err := time.ParseDuration(v)
		if err != nil {
			logger.Error("MF_TEST_CLOCK_OFFSET is not a duration; ignored", "value", v)
		} else {
			deps.Clock = func() time.Time { return time.Now().Add(d) }
			logger.Warn("fault build: the processor's clock runs ahead", "offset", d)
		}
	}
	if v := os.Getenv("MF_TEST_RETENTION_INTERVAL"); v != "" {
		d, err := time.ParseDuration(v)
		if err != nil || d <= 0 {
			logger.Error("MF_TEST_RETENTION_INTERVAL is not a positive duration; ignored", "value", v)
		} else {
			cfg.RetentionInterval = d
			logger.Warn("fault build: the processor looks at retention more often", "interval", d)
		}
	}
}
