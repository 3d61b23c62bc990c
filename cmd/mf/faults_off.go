//go:build !mffaults

package main

import "github.com/gofiber/fiber/v2"

// faultInjection is false in every build but the tests' fault build
// (faults_on.go): the panicGuard adds no handler then.
const faultInjection = false

func injectPanic(c *fiber.Ctx) error { return c.Next() }
