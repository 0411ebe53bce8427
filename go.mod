module github.com/sandboxkit/sandbox

go 1.26
