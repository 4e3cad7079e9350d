# meson.build: the +ds tarball dropped pc-bios/edk2-*.fd.bz2, which meson
# would unpack when bzip2 is found; the guest boots with SeaBIOS, so the
# edk2 firmware is not needed.
s/unpack_edk2_blobs = bzip2.found()/unpack_edk2_blobs = false/
