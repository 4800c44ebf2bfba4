//! US Social Security numbers: AAA-GG-SSSS under the SSA's rules (no area 000, 666 or 900-999,
//! no group 00, no serial 0000), and not one of the numbers known from advertising.

/// Whether the three groups (ASCII digits, 3, 2 and 4 long) form a possible SSN.
pub fn is_ssn(area: &[u8], group: &[u8], serial: &[u8]) -> bool {
    if area.len() != 3 || group.len() != 2 || serial.len() != 4 {
        return false;
    }
    let n = |d: &[u8]| d.iter().fold(0u32, |a, &b| a * 10 + u32::from(b - b'0'));
    let (a, g, s) = (n(area), n(group), n(serial));
    // 078-05-1120 was printed on wallet inserts; 219-09-9999 in an advertisement.
    let famous = (a, g, s) == (78, 5, 1120) || (a, g, s) == (219, 9, 9999);
    a != 0 && a != 666 && a < 900 && g != 0 && s != 0 && !famous
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_rules_hold() {
        let ok = |s: &str| {
            let p: Vec<&str> = s.split('-').collect();
            is_ssn(p[0].as_bytes(), p[1].as_bytes(), p[2].as_bytes())
        };
        assert!(ok("123-45-6789") && ok("899-99-9999") && ok("001-01-0001"));
        for bad in [
            "000-12-3456",
            "666-12-3456",
            "900-12-3456",
            "123-00-4567",
            "123-45-0000",
            "078-05-1120",
        ] {
            assert!(!ok(bad), "{bad}");
        }
    }
}
