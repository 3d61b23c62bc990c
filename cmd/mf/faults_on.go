//go:build mffaults

package main

import (
	"log/slog"
	"os"

	"github.com/gofiber/fiber/v2"
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
