// Package api serves the reporting API (/api/v1, JSON:API) and the admin API
// (/admin/v1).
package api
