//! A byte source that, like a UART or an SD card driver, returns fewer bytes than asked for.

/// Read sizes cycled through: odd, small and large, so that keys, strings and tensor infos are cut
/// at every kind of place.
const READ_SIZES: [usize; 7] = [1, 7, 61, 13, 200, 3, 97];

/// Serves `data` through [`embedded_io::Read`] in short reads.
pub struct ShortReads<'a> {
    data: &'a [u8],
    at: usize,
    reads: usize,
}

impl<'a> ShortReads<'a> {
    /// A reader over `data`.
    pub fn new(data: &'a [u8]) -> Self {
        Self {
            data,
            at: 0,
            reads: 0,
        }
    }

    /// How many reads the parser made.
    pub fn reads(&self) -> usize {
        self.reads
    }
}

impl embedded_io::ErrorType for ShortReads<'_> {
    type Error = core::convert::Infallible;
}

impl embedded_io::Read for ShortReads<'_> {
    fn read(&mut self, buf: &mut [u8]) -> Result<usize, Self::Error> {
        let rest = self.data.get(self.at..).unwrap_or(&[]);
        let size = READ_SIZES[self.reads % READ_SIZES.len()];
        let n = size.min(buf.len()).min(rest.len());
        buf[..n].copy_from_slice(&rest[..n]);
        self.at += n;
        self.reads += 1;
        Ok(n)
    }
}
