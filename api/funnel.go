package api

import "github.com/gofiber/fiber/v2"

// getFunnel is not built yet.
func (r *Reporting) getFunnel(c *fiber.Ctx) error {
	return refuse(fiber.StatusNotImplemented, "not_implemented", "", "not built yet")
}
