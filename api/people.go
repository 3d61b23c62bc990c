package api

import "github.com/gofiber/fiber/v2"

// listPeople is not built yet.
func (r *Reporting) listPeople(c *fiber.Ctx) error {
	return refuse(fiber.StatusNotImplemented, "not_implemented", "", "not built yet")
}

// getPerson is not built yet.
func (r *Reporting) getPerson(c *fiber.Ctx) error {
	return refuse(fiber.StatusNotImplemented, "not_implemented", "", "not built yet")
}
