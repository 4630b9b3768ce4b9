module chaossuite/s3proxy

go 1.22
