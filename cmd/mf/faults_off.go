//go:build !mffaults

package main

import (
	"log/slog"

	"github.com/gofiber/fiber/v2"

	"github.com/mfhq/mf/processor"
)

// faultInjection is false in every build but the tests' fault build
// (faults_on.go): the panicGuard adds no handler then.
const faultInjection = false

func injectPanic(c *fiber.Ctx) error { return c.Next() }

// faultHook is nil but in the fault build (faults_on.go).
func faultHook(*slog.Logger) func(point string) { return nil }

// faultClock leaves the processor's clock and retention interval alone
// but in the fault build (faults_on.go).
func faultClock(*processor.Config, *processor.Deps, *slog.Logger) {}
