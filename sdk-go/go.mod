module github.com/wasmop/wasmop/sdk-go

go 1.24
