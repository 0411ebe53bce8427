module github.com/sandboxkit/sandbox/contrib/openai

go 1.26.0

require (
	github.com/openai/openai-go/v3 v3.105.0
	github.com/sandboxkit/sandbox v0.0.0
)

require (
	github.com/coder/websocket v1.8.15 // indirect
	github.com/tidwall/gjson v1.20.1 // indirect
	github.com/tidwall/match v1.1.1 // indirect
	github.com/tidwall/pretty v1.2.1 // indirect
	github.com/tidwall/sjson v1.2.5 // indirect
	golang.org/x/net v0.62.0 // indirect
	golang.org/x/sync v0.25.0 // indirect
	golang.org/x/text v0.43.0 // indirect
)

replace github.com/sandboxkit/sandbox => ../..
