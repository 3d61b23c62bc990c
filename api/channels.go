package api

import "github.com/gofiber/fiber/v2"

// listChannels is not built yet.
func (r *Reporting) listChannels(c *fiber.Ctx) error {
	return refuse(fiber.StatusNotImplemented, "not_implemented", "", "not built yet")
}
