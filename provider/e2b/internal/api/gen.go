// Package api is the generated client and server interface of the E2B
// control-plane API, from the trimmed description in openapi.yaml.
package api

//go:generate go run github.com/oapi-codegen/oapi-codegen/v2/cmd/oapi-codegen@v2.8.2 -config cfg.yaml openapi.yaml
