package api

import "github.com/gofiber/fiber/v2"

// getSearch is not built yet.
func (r *Reporting) getSearch(c *fiber.Ctx) error {
	return refuse(fiber.StatusNotImplemented, "not_implemented", "", "not built yet")
}
