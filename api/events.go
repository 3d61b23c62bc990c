package api

import "github.com/gofiber/fiber/v2"

// listEvents is not built yet.
func (r *Reporting) listEvents(c *fiber.Ctx) error {
	return refuse(fiber.StatusNotImplemented, "not_implemented", "", "not built yet")
}
