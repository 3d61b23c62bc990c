package api

import "github.com/gofiber/fiber/v2"

// getOverview is not built yet.
func (r *Reporting) getOverview(c *fiber.Ctx) error {
	return refuse(fiber.StatusNotImplemented, "not_implemented", "", "not built yet")
}
