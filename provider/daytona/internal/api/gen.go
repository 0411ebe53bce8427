// Package api is the generated client of the Daytona main API (the NestJS
// service under /api), from the trimmed description in openapi.yaml.
//
// The description follows what the server does where it differs from the
// published spec: the POST setters answer 201 as well as 200, PUT labels
// answers a full Sandbox, numeric sizes are integers, error bodies have the
// NestJS shape.
package api

//go:generate go run github.com/oapi-codegen/oapi-codegen/v2/cmd/oapi-codegen@v2.8.2 -config cfg.yaml openapi.yaml
