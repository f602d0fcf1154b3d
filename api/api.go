// Package api holds the shop's hand-written OpenAPI 3.1 description, which
// the shop serves at /api/openapi.yaml.
package api

import _ "embed"

// OpenAPI is api/openapi.yaml.
//
//go:embed openapi.yaml
var OpenAPI []byte
