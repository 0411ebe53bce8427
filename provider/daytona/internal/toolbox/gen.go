// Package toolbox is the generated client of the Daytona toolbox API (the
// daemon inside each sandbox, reached through the toolbox proxy at
// {toolboxProxyUrl}/{sandboxId}), from the trimmed description in
// openapi.yaml.
//
// The description follows what the daemon does: error bodies are optional
// (the file handlers answer with an empty body), FileInfo times are plain
// strings, session logs come as JSON or plain text depending on the
// X-Daytona-SDK-Version header, and the move and folder operations take
// query parameters.
package toolbox

//go:generate go run github.com/oapi-codegen/oapi-codegen/v2/cmd/oapi-codegen@v2.8.2 -config cfg.yaml openapi.yaml
