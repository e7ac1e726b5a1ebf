# info: what ibv_devices and ibv_devinfo see (the first test's check that rxe0 is up)
ibv_devices
ibv_devinfo -v | grep -E 'hca_id|transport|max_mtu|active_mtu|state|link_layer|GID|atomic_cap'
