"""The `cronhooks` command and `cronhooks up`: they compose every service, so they live
above them (libs/ never imports a service; services import libs/)."""
