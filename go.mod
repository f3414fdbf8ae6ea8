module github.com/cphicache/cphicache

go 1.26
