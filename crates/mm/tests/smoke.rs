use fraglab_mm::*;
use fraglab_mm::mmzone::*;

#[test]
fn smoke_sample_machine() {
    let m = MachineConfig { nr_cpus: 2, zones: vec![
        ZoneConfig { zone_type: ZoneType::Dma, start_pfn: 1, spanned: 4095, present: 3998, managed: 3840 },
        ZoneConfig { zone_type: ZoneType::Dma32, start_pfn: 4096, spanned: 1044480, present: 782336, managed: 772917 },
        ZoneConfig { zone_type: ZoneType::Normal, start_pfn: 1048576, spanned: 327680, present: 327680, managed: 327680 },
    ]};
    let mut mm = Mm::new(&m, Tunables::default()).unwrap();
    mm.debug_vm = true;
    mm.check_invariants().unwrap();
    assert_eq!(mm.min_free_kbytes, 67584);
    for z in &mm.zones { eprintln!("{:?} wm {:?} lr {:?} batch {} hmin {} hmax {}", z.zone_type, z.wmark, z.lowmem_reserve, z.pcp[0].batch, z.pcp[0].high_min, z.pcp[0].high_max); }
    let mut v = vec![];
    for i in 0..5000 { v.push(mm.alloc_pages(0, Gfp::GFP_KERNEL, 0).unwrap()); if i % 7 == 0 { mm.debug_check(); } }
    for i in 0..2000 { v.push(mm.alloc_pages(1, Gfp::GFP_HIGHUSER_MOVABLE, (i % 4) as u32).unwrap()); }
    mm.check_invariants().unwrap();
    let views = mm.zone_views();
    eprintln!("{:?}", views[2].nr_free_by_type);
    eprintln!("blocks {:?}", views[2].blocks_by_type);
    for (i, p) in v.iter().enumerate() { let o = if i < 5000 {0} else {((i-5000)%4) as u32}; mm.free_pages((i%2) as u32, *p, o); }
    mm.check_invariants().unwrap();
    mm.drain_all_pages();
    let c = mm.check_invariants().unwrap();
    assert_eq!(c.free, c.managed);
    eprintln!("{:?}", mm.zone_views()[2].nr_free_by_type);
}
