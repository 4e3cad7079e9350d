//! Userspace client of the habanalabs_rs accel device.
//!
//! The uAPI types are the kernel module's own `src/uapi.rs`, compiled here
//! unchanged, so the two sides cannot drift apart.

#[path = "../../../uapi.rs"]
pub mod uapi;

#[cfg(test)]
mod tests {
    use super::uapi::*;
    use std::mem::size_of;

    #[test]
    fn ioctl_numbers_match_the_upstream_header() {
        assert_eq!(DRM_IOCTL_HL_INFO, 0xC018_6440);
        assert_eq!(DRM_IOCTL_HL_MEMORY, 0xC028_6444);
        assert_eq!(ioc_size(DRM_IOCTL_HL_MEMORY), size_of::<HlMemArgs>());
    }

    #[test]
    fn struct_sizes_match_the_upstream_header() {
        assert_eq!(size_of::<HlInfoArgs>(), 24);
        assert_eq!(size_of::<HlInfoHwIpInfo>(), 304);
        assert_eq!(size_of::<HlInfoDramUsage>(), 16);
        assert_eq!(size_of::<HlInfoHwIdle>(), 40);
        assert_eq!(size_of::<HlMemArgs>(), 40);
    }

    #[test]
    fn out_fd_is_the_low_four_bytes() {
        let mut a = HlMemArgs::default();
        a.set_out_fd_zeroed(5);
        let bytes = a.arg0.to_ne_bytes();
        assert_eq!(
            i32::from_ne_bytes([bytes[0], bytes[1], bytes[2], bytes[3]]),
            5
        );
    }
}
